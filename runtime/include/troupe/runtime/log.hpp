#pragma once

/// \file
/// Structured logging: levels, text or JSON lines, and a context whose fields (such as
/// a request id) appear on every line written through it.

#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "troupe/runtime/error.hpp"

namespace troupe::log {

/// Severity, lowest first.
enum class level { trace, debug, info, warn, error, off };

/// The shape of each line: human text or one JSON object per line.
enum class format { text, json };

/// Parses "trace", "debug", "info", "warn", "error" or "off".
expected<level> parse_level(std::string_view name);
/// Parses "text" or "json".
expected<format> parse_format(std::string_view name);
std::string_view to_string(level l) noexcept;

/// One key/value pair attached to a log line.
struct field {
  std::string key;
  std::string value;
};

/// Sets the process-wide threshold, line format and sink (stderr by default).
/// Thread-safe; lines already being written finish in the old format.
void configure(level threshold, format shape, std::FILE* sink = stderr);

/// True when lines of `l` are written.
bool enabled(level l) noexcept;

/// Writes one line. Thread-safe: lines from different threads never interleave.
void write(level l, std::string_view message, const std::vector<field>& fields = {});

/// A set of fields stamped on every line written through it, e.g. the request id of an
/// HTTP request. Cheap to copy; pass it by value into coroutines.
class context {
public:
  context() = default;
  context(std::initializer_list<field> fields) : fields_(fields) {}

  /// A copy of this context with one more field.
  context with(std::string key, std::string value) const {
    auto copy = *this;
    copy.fields_.push_back({std::move(key), std::move(value)});
    return copy;
  }

  template <class... Args>
  void log(level l, fmt::format_string<Args...> text, Args&&... args) const {
    if (enabled(l)) {
      write(l, fmt::format(text, std::forward<Args>(args)...), fields_);
    }
  }
  template <class... Args> void debug(fmt::format_string<Args...> text, Args&&... args) const {
    log(level::debug, text, std::forward<Args>(args)...);
  }
  template <class... Args> void info(fmt::format_string<Args...> text, Args&&... args) const {
    log(level::info, text, std::forward<Args>(args)...);
  }
  template <class... Args> void warn(fmt::format_string<Args...> text, Args&&... args) const {
    log(level::warn, text, std::forward<Args>(args)...);
  }
  template <class... Args> void error(fmt::format_string<Args...> text, Args&&... args) const {
    log(level::error, text, std::forward<Args>(args)...);
  }

  const std::vector<field>& fields() const noexcept {
    return fields_;
  }

private:
  std::vector<field> fields_;
};

/// Lines with no context fields.
template <class... Args> void debug(fmt::format_string<Args...> text, Args&&... args) {
  context{}.debug(text, std::forward<Args>(args)...);
}
template <class... Args> void info(fmt::format_string<Args...> text, Args&&... args) {
  context{}.info(text, std::forward<Args>(args)...);
}
template <class... Args> void warn(fmt::format_string<Args...> text, Args&&... args) {
  context{}.warn(text, std::forward<Args>(args)...);
}
template <class... Args> void error(fmt::format_string<Args...> text, Args&&... args) {
  context{}.error(text, std::forward<Args>(args)...);
}

/// Formats one line as it would be written, without the trailing newline (for tests).
std::string format_line(format shape, level l, std::string_view timestamp, std::string_view message,
                        const std::vector<field>& fields);

} // namespace troupe::log
