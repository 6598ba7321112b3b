// Fuzzes troupe's TOML config loader: troupe::apply_toml (runtime/include/troupe/runtime/
// settings.hpp), the function resolve_settings applies the config file's text with.
//
// Input: the text of a config file. Properties checked: no crash, leak or undefined
// behaviour; a rejected file is invalid_argument with a message naming the source; an
// accepted file, printed back with to_toml (`troupe serve --print-config`), loads again
// to the same settings (the printed form is valid TOML that means what was loaded).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "troupe/runtime/settings.hpp"

namespace {

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

// to_toml notes a configured api_key (or channel token) without printing it; the
// reloaded settings have none.
std::string without_secret_notes(std::string text) {
  for (const std::string_view note :
       {"# api_key is set (not printed)\n", "# token is set (not printed)\n"}) {
    for (auto at = text.find(note); at != std::string::npos; at = text.find(note, at)) {
      text.erase(at, note.size());
    }
  }
  return text;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto loaded = troupe::apply_toml(troupe::settings{}, text, "fuzz.toml");
  if (!loaded) {
    check(loaded.error().code == troupe::errc::invalid_argument);
    check(loaded.error().message.starts_with("fuzz.toml"));
    return 0;
  }
  const auto printed = without_secret_notes(troupe::to_toml(*loaded));
  auto reloaded = troupe::apply_toml(troupe::settings{}, printed, "printed.toml");
  check(reloaded.has_value());
  check(troupe::to_toml(*reloaded) == printed);
  return 0;
}
