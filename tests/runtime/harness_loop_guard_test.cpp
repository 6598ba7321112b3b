#include <catch2/catch.hpp>

#include "troupe/runtime/harness/loop_guard.hpp"

using namespace troupe::harness;

TEST_CASE("the fifth identical consecutive call is blocked", "[runtime][harness][loop]") {
  loop_guard guard;
  for (int i = 1; i <= 4; ++i) {
    CAPTURE(i);
    CHECK(guard.check("read", R"({"path":"a.txt"})").ok());
  }
  // Same call, keys reordered and spaced: still identical.
  const auto fifth = guard.check("read", R"({ "path" : "a.txt" })");
  CHECK(fifth.what == loop_verdict::kind::repeated_call);
  CHECK(fifth.blocked);
  CHECK_THAT(fifth.message, Catch::Contains("same arguments"));
  CHECK(guard.check("read", R"({"path":"a.txt"})").blocked); // the sixth stays refused
  CHECK(guard.check("read", R"({"path":"b.txt"})").ok());    // different arguments run
}

TEST_CASE("a different call in between resets the repeat count", "[runtime][harness][loop]") {
  loop_guard guard;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(guard.check("exec", R"({"command":"ls"})").ok());
  }
  REQUIRE(guard.check("read", R"({"path":"x"})").ok());
  CHECK(guard.check("exec", R"({"command":"ls"})").ok());
}

TEST_CASE("A-B-A-B ping-pong is detected", "[runtime][harness][loop]") {
  loop_guard guard;
  const char* a = R"({"path":"a.txt"})";
  const char* b = R"({"path":"a.txt","content":"x"})";
  CHECK(guard.check("read", a).ok());
  CHECK(guard.check("write", b).ok());
  CHECK(guard.check("read", a).ok());
  const auto fourth = guard.check("write", b);
  CHECK(fourth.what == loop_verdict::kind::ping_pong);
  CHECK_FALSE(fourth.blocked); // A-B-A-B warns
  CHECK(guard.check("read", a).what == loop_verdict::kind::ping_pong);
  const auto sixth = guard.check("write", b);
  CHECK(sixth.what == loop_verdict::kind::ping_pong);
  CHECK(sixth.blocked); // A-B-A-B-A-B is refused
  CHECK(guard.check("ls", "{}").ok());
}

TEST_CASE("the loop guard keeps a bounded history", "[runtime][harness][loop]") {
  loop_guard guard;
  for (int i = 0; i < 100; ++i) {
    REQUIRE(guard.check("read", "{\"n\":" + std::to_string(i) + "}").ok());
  }
  CHECK(guard.size() == loop_guard::history_limit);
}

TEST_CASE("canonical arguments sort keys and drop white space", "[runtime][harness][loop]") {
  CHECK(canonical_arguments(R"({"b": [1, {"d":true,"c":null}], "a": "x"})") ==
        R"({"a":"x","b":[1,{"c":null,"d":true}]})");
  CHECK(canonical_arguments("") == "{}");
  CHECK(canonical_arguments("  not json ") == "not json");
}
