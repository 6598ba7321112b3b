#include "troupe/runtime/run_event.hpp"

#include <chrono>

#include "troupe/runtime/json_writer.hpp"

namespace troupe {

std::string_view to_string(run_event_type t) noexcept {
  switch (t) {
    case run_event_type::run_started:
      return "run.started";
    case run_event_type::run_completed:
      return "run.completed";
    case run_event_type::run_failed:
      return "run.failed";
    case run_event_type::run_cancelled:
      return "run.cancelled";
    case run_event_type::model_delta:
      return "model.delta";
    case run_event_type::model_correction:
      return "model.correction";
    case run_event_type::action_started:
      return "action.started";
    case run_event_type::action_finished:
      return "action.finished";
    case run_event_type::harness:
      return "harness";
    case run_event_type::context_compressed:
      return "context.compressed";
    case run_event_type::approval:
      return "approval";
  }
  return "unknown";
}

std::string run_event::type_name() const {
  if (type == run_event_type::harness) {
    return "harness." + harness_name;
  }
  return std::string(to_string(type));
}

std::string run_event::to_json() const {
  json_writer w;
  w.begin_object();
  w.key("version").value(version);
  w.key("run_id").value(run_id);
  w.key("turn_id").value(turn_id);
  w.key("seq").value(seq);
  w.key("type").value(type_name());
  w.key("created_at").value(created_at);
  w.key("data").raw(data_json.empty() ? std::string_view("{}") : std::string_view(data_json));
  w.end_object();
  return std::move(w).str();
}

std::int64_t unix_seconds_now() noexcept {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t unix_millis_now() noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace troupe
