#include <catch2/catch.hpp>

#include "troupe/runtime/run_event.hpp"

using namespace troupe;

TEST_CASE("a run event serializes its version, ids, sequence, type, timestamp and data",
          "[runtime][run_event]") {
  run_event e;
  e.run_id = "r1";
  e.turn_id = "t1";
  e.seq = 7;
  e.type = run_event_type::model_delta;
  e.created_at = 1700000000123;
  e.data_json = R"({"text":"hi"})";
  CHECK(e.to_json() == R"({"version":1,"run_id":"r1","turn_id":"t1","seq":7,)"
                       R"("type":"model.delta","created_at":1700000000123,"data":{"text":"hi"}})");
}

TEST_CASE("a harness event is named after its step", "[runtime][run_event]") {
  run_event e;
  e.type = run_event_type::harness;
  e.harness_name = "validate_pre_final";
  CHECK(e.type_name() == "harness.validate_pre_final");
  CHECK(to_string(run_event_type::model_correction) == "model.correction");
}
