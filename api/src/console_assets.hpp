#pragma once

// Private to api/: the web console's files, embedded at build time from web/ by
// cmake/embed_console.cmake (the generated console_assets.cpp in the build tree).

#include <span>
#include <string_view>

namespace troupe::api {

/// One embedded file of the console.
struct console_asset {
  /// Its path under web/console ("app.js", "views/chat.js").
  std::string_view name;
  /// The Content-Type it is served with.
  std::string_view media_type;
  /// A strong ETag: its SHA-256 in hex, quoted.
  std::string_view etag;
  std::span<const unsigned char> bytes;
};

/// Every file under web/console, sorted by name.
std::span<const console_asset> console_assets() noexcept;

/// web/index.html, its asset links pointing at `/console/<console_version()>/`.
const console_asset& console_index() noexcept;

/// A hash of every asset's name and content: the path segment that versions their URLs.
std::string_view console_version() noexcept;

} // namespace troupe::api
