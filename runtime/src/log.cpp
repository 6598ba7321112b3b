#include "troupe/runtime/log.hpp"

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::log {

namespace {

struct logger_state {
  std::atomic<int> threshold{static_cast<int>(level::info)};
  std::atomic<format> shape{format::text};
  std::atomic<std::FILE*> sink{stderr};
  std::mutex write_mutex;
};

logger_state& state() {
  static logger_state instance;
  return instance;
}

std::string utc_timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const auto seconds = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", parts.tm_year + 1900,
                     parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec,
                     millis);
}

bool needs_quotes(std::string_view value) {
  if (value.empty()) {
    return true;
  }
  for (const char c : value) {
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) {
      return true;
    }
  }
  return false;
}

} // namespace

expected<level> parse_level(std::string_view name) {
  if (name == "trace") {
    return level::trace;
  }
  if (name == "debug") {
    return level::debug;
  }
  if (name == "info") {
    return level::info;
  }
  if (name == "warn" || name == "warning") {
    return level::warn;
  }
  if (name == "error") {
    return level::error;
  }
  if (name == "off") {
    return level::off;
  }
  return fail(errc::invalid_argument,
              fmt::format("unknown log level '{}' (expected trace, debug, info, warn, error "
                          "or off)",
                          name));
}

expected<format> parse_format(std::string_view name) {
  if (name == "text") {
    return format::text;
  }
  if (name == "json") {
    return format::json;
  }
  return fail(errc::invalid_argument,
              fmt::format("unknown log format '{}' (expected text or json)", name));
}

std::string_view to_string(level l) noexcept {
  switch (l) {
    case level::trace:
      return "trace";
    case level::debug:
      return "debug";
    case level::info:
      return "info";
    case level::warn:
      return "warn";
    case level::error:
      return "error";
    case level::off:
      return "off";
  }
  return "unknown";
}

void configure(level threshold, format shape, std::FILE* sink) {
  auto& s = state();
  s.threshold.store(static_cast<int>(threshold));
  s.shape.store(shape);
  s.sink.store(sink);
}

bool enabled(level l) noexcept {
  return l != level::off &&
         static_cast<int>(l) >= state().threshold.load(std::memory_order_relaxed);
}

std::string format_line(format shape, level l, std::string_view timestamp, std::string_view message,
                        const std::vector<field>& fields) {
  std::string line;
  if (shape == format::json) {
    json_writer w;
    w.begin_object().key("ts").value(timestamp).key("level").value(to_string(l));
    w.key("msg").value(message);
    for (const auto& f : fields) {
      w.key(f.key).value(f.value);
    }
    w.end_object();
    return std::move(w).str();
  }
  line.reserve(timestamp.size() + message.size() + 32);
  line.append(timestamp);
  line.push_back(' ');
  auto name = to_string(l);
  line.append(name);
  line.append(6 - name.size(), ' ');
  line.append(message);
  for (const auto& f : fields) {
    line.push_back(' ');
    line.append(f.key);
    line.push_back('=');
    if (needs_quotes(f.value)) {
      append_json_string(line, f.value);
    } else {
      line.append(f.value);
    }
  }
  return line;
}

void write(level l, std::string_view message, const std::vector<field>& fields) {
  if (!enabled(l)) {
    return;
  }
  auto& s = state();
  auto line = format_line(s.shape.load(), l, utc_timestamp(), message, fields);
  line.push_back('\n');
  std::lock_guard lock(s.write_mutex);
  auto* sink = s.sink.load();
  std::fwrite(line.data(), 1, line.size(), sink);
  std::fflush(sink);
}

} // namespace troupe::log
