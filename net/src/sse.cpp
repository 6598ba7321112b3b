#include "troupe/net/sse.hpp"

#include <fmt/format.h>

namespace troupe::net {

namespace {

// Appends `value` with CR and LF removed: a field value must stay on one line.
void append_single_line(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c != '\n' && c != '\r') {
      out.push_back(c);
    }
  }
}

} // namespace

void append_sse_event(std::string& out, const sse_event& e) {
  if (!e.event.empty()) {
    out += "event: ";
    append_single_line(out, e.event);
    out.push_back('\n');
  }
  if (!e.id.empty()) {
    out += "id: ";
    append_single_line(out, e.id);
    out.push_back('\n');
  }
  if (e.retry_ms) {
    out += fmt::format("retry: {}\n", *e.retry_ms);
  }
  std::string_view data = e.data;
  // An event without data lines is dropped by clients; always write at least one.
  do {
    std::size_t end = 0;
    while (end < data.size() && data[end] != '\n' && data[end] != '\r') {
      ++end;
    }
    out += "data: ";
    out.append(data.substr(0, end));
    out.push_back('\n');
    if (end == data.size()) {
      break;
    }
    std::size_t next = end + 1;
    if (data[end] == '\r' && next < data.size() && data[next] == '\n') {
      ++next;
    }
    data.remove_prefix(next);
    if (data.empty()) {
      // A trailing newline means one more (empty) data line.
      out += "data: \n";
      break;
    }
  } while (true);
  out.push_back('\n');
}

std::string format_sse_event(const sse_event& e) {
  std::string out;
  out.reserve(e.data.size() + e.event.size() + e.id.size() + 24);
  append_sse_event(out, e);
  return out;
}

std::string format_sse_comment(std::string_view text) {
  std::string out = ": ";
  append_single_line(out, text);
  out += "\n\n";
  return out;
}

} // namespace troupe::net
