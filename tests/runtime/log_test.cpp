#include <catch2/catch.hpp>

#include "troupe/runtime/log.hpp"

using namespace troupe;

TEST_CASE("text log lines carry level, message and context fields", "[runtime][log]") {
  const auto line = log::format_line(log::format::text, log::level::warn, "T", "slow request",
                                     {{"request_id", "abc-1"}, {"path", "/a b"}});
  CHECK(line == R"(T warn  slow request request_id=abc-1 path="/a b")");
}

TEST_CASE("json log lines are one JSON object with the context fields", "[runtime][log]") {
  const auto line = log::format_line(log::format::json, log::level::info, "T", "say \"hi\"",
                                     {{"request_id", "abc-1"}});
  CHECK(line == R"({"ts":"T","level":"info","msg":"say \"hi\"","request_id":"abc-1"})");
}

TEST_CASE("a log context adds fields without changing the original", "[runtime][log]") {
  const log::context base{{"request_id", "r1"}};
  const auto more = base.with("run_id", "7");
  CHECK(base.fields().size() == 1);
  REQUIRE(more.fields().size() == 2);
  CHECK(more.fields()[1].key == "run_id");
}

TEST_CASE("log levels and formats parse by name", "[runtime][log]") {
  CHECK(log::parse_level("debug").value() == log::level::debug);
  CHECK(log::parse_level("warning").value() == log::level::warn);
  CHECK_FALSE(log::parse_level("loud"));
  CHECK(log::parse_format("json").value() == log::format::json);
  CHECK_FALSE(log::parse_format("yaml"));
}

TEST_CASE("lines below the threshold are not enabled", "[runtime][log]") {
  log::configure(log::level::warn, log::format::text);
  CHECK_FALSE(log::enabled(log::level::info));
  CHECK(log::enabled(log::level::error));
  log::configure(log::level::off, log::format::text);
  CHECK_FALSE(log::enabled(log::level::error));
  log::configure(log::level::info, log::format::text);
}
