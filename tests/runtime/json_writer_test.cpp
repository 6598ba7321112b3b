#include <catch2/catch.hpp>

#include "troupe/runtime/json_writer.hpp"

using troupe::json_writer;

TEST_CASE("json writer separates members and nests containers", "[runtime][json]") {
  json_writer w;
  w.begin_object();
  w.key("a").value(1);
  w.key("b").begin_array().value(true).value(nullptr).value(-2).end_array();
  w.key("c").begin_object().key("d").value("e").end_object();
  w.key("f").raw(R"({"x":1})");
  w.end_object();
  CHECK(w.str() == R"({"a":1,"b":[true,null,-2],"c":{"d":"e"},"f":{"x":1}})");
}

TEST_CASE("json strings escape quotes, backslashes and control characters", "[runtime][json]") {
  std::string out;
  troupe::append_json_string(out, std::string("q\"b\\n\nt\tz\x01", 10));
  CHECK(out == R"("q\"b\\n\nt\tz\u0001")");
}

TEST_CASE("json strings keep valid UTF-8 and replace invalid bytes", "[runtime][json]") {
  std::string out;
  troupe::append_json_string(out, "h\xC3\xA9llo \xE2\x82\xAC");
  CHECK(out == "\"h\xC3\xA9llo \xE2\x82\xAC\"");
  out.clear();
  troupe::append_json_string(out, "bad\xFF\xC3"); // stray byte and a truncated sequence
  CHECK(out == "\"bad\xEF\xBF\xBD\xEF\xBF\xBD\"");
  out.clear();
  troupe::append_json_string(out, "\xED\xA0\x80"); // an encoded surrogate is not UTF-8
  CHECK(out == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
}

TEST_CASE("json numbers are finite or null", "[runtime][json]") {
  json_writer w;
  w.begin_array().value(1.5).value(std::numeric_limits<double>::infinity()).end_array();
  CHECK(w.str() == "[1.5,null]");
}
