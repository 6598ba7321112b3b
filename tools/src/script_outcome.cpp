#include "script_outcome.hpp"

#include <fmt/format.h>
#include <simdjson.h>

namespace troupe::tools::detail {

void json_or_text(json_writer& w, std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::dom::element value;
  if (!text.empty() && parser.parse(text.data(), text.size()).get(value) == simdjson::SUCCESS) {
    w.raw(simdjson::minify(value));
  } else {
    w.value(text);
  }
}

void write_script_outcome(json_writer& w, const sandbox_result& r, bool ok,
                          std::string_view timeout_error) {
  if (ok) {
    w.key("result");
    // A trailing newline is how programs end their output, not part of a text result.
    std::string_view out = r.stdout_text;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
      out.remove_suffix(1);
    }
    json_or_text(w, out);
    if (!r.stderr_text.empty()) {
      w.key("stderr").value(r.stderr_text);
    }
  } else {
    w.key("exit_code").value(r.exit_code).key("stdout").value(r.stdout_text);
    w.key("stderr").value(r.stderr_text);
    w.key("error").value(!r.error.empty() ? r.error
                         : r.timed_out
                             ? std::string(timeout_error)
                             : fmt::format("the script exited with code {}", r.exit_code));
  }
  w.key("sandboxed").value(r.sandboxed);
  if (r.stdout_truncated || r.stderr_truncated) {
    w.key("truncated").value(true);
  }
}

} // namespace troupe::tools::detail
