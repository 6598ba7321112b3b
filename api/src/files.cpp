// The /api/v1/files routes: multipart upload, metadata, list, and downloads for the
// owner's token or a signed, expiring link; the key that signs the links.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>

#include <boost/asio/co_spawn.hpp>
#include <fmt/format.h>

#include "json.hpp"
#include "private_file.hpp"
#include "state.hpp"
#include "troupe/api/files.hpp"
#include "troupe/net/multipart.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/log.hpp"
#include "troupe/runtime/run_event.hpp"
#include "troupe/storage/file_store.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::api {

namespace {

// A file name safe to store and show: the last path segment, no control characters,
// at most 255 bytes.
std::string clean_file_name(std::string_view name) {
  const auto slash = name.find_last_of("/\\");
  if (slash != std::string_view::npos) {
    name = name.substr(slash + 1);
  }
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out.push_back(ch);
    }
  }
  if (out.size() > 255) {
    out.resize(255);
  }
  if (out.empty() || out == "." || out == "..") {
    out = "file";
  }
  return out;
}

// A media type like "text/plain; charset=utf-8" passes; anything with odd characters or
// no slash becomes application/octet-stream.
std::string clean_mime(std::string_view mime) {
  if (mime.empty() || mime.size() > 127 || mime.find('/') == std::string_view::npos) {
    return "application/octet-stream";
  }
  for (const char ch : mime) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      return "application/octet-stream";
    }
  }
  return std::string(mime);
}

// `attachment; filename="<ASCII fallback>"; filename*=UTF-8''<percent-encoded>` (RFC 6266
// and RFC 8187): the quoted form never carries quotes, backslashes or non-ASCII bytes.
std::string content_disposition(std::string_view name) {
  std::string ascii;
  std::string encoded;
  static constexpr char hex[] = "0123456789ABCDEF";
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    ascii.push_back(c < 0x20 || c >= 0x7f || ch == '"' || ch == '\\' ? '_' : ch);
    if (std::isalnum(c) || std::strchr("!#$&+-.^_`|~", ch) != nullptr) {
      encoded.push_back(ch);
    } else {
      encoded.push_back('%');
      encoded.push_back(hex[c >> 4]);
      encoded.push_back(hex[c & 0x0f]);
    }
  }
  return fmt::format("attachment; filename=\"{}\"; filename*=UTF-8''{}", ascii, encoded);
}

/// A file's view; `run_id`, when given, is the public id of the run that made it.
void write_file(json_writer& w, const storage::file_record& f, const api_state& state,
                const std::string* run_id = nullptr) {
  const auto expires =
      unix_seconds_now() +
      std::chrono::duration_cast<std::chrono::seconds>(state.config.signed_link_ttl).count();
  w.begin_object();
  w.key("id").value(f.uuid);
  w.key("name").value(f.name);
  w.key("mime_type").value(f.mime_type);
  w.key("size_bytes").value(f.size_bytes);
  w.key("sha256").value(f.sha256);
  w.key("kind").value(f.kind);
  w.key("created_at").value(f.created_at);
  w.key("download_url").value(signed_file_link(state.link_secret, f.uuid, expires));
  w.key("download_expires_at").value(expires);
  if (run_id) {
    w.key("run_id").value(*run_id);
  }
  w.end_object();
}

// Downloads are read in pieces of this size on the blocking pool and streamed; a file no
// larger than one piece is answered in one response with its length.
constexpr std::size_t download_piece_bytes = 256 * 1024;

// A download's open file and the piece last read from it; shared by the handler, the
// pool jobs and the coroutine that streams the rest.
struct download_source {
  int fd = -1;
  std::string piece;
  bool at_end = false;
  download_source() = default;
  download_source(const download_source&) = delete;
  download_source& operator=(const download_source&) = delete;
  ~download_source() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

// Reads the next piece (up to download_piece_bytes) into `source.piece`.
expected<void> read_piece(download_source& source) {
  source.piece.resize(download_piece_bytes);
  std::size_t filled = 0;
  while (filled < source.piece.size()) {
    const auto n = ::read(source.fd, source.piece.data() + filled, source.piece.size() - filled);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail(errc::io_error, fmt::format("reading the file failed: {}", std::strerror(errno)));
    }
    if (n == 0) {
      source.at_end = true;
      break;
    }
    filled += static_cast<std::size_t>(n);
  }
  source.piece.resize(filled);
  return {};
}

// Opens a stored file for reading without following a link or waiting on a special file
// (the files directory is troupe's own, but nothing read from disk is trusted), then
// reads its first piece.
expected<void> open_download(download_source& source, const std::filesystem::path& path) {
  source.fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (source.fd < 0) {
    return fail(errno == ENOENT ? errc::not_found : errc::io_error,
                fmt::format("opening the file failed: {}", std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(source.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return fail(errc::io_error, "the stored file is not a regular file");
  }
  return read_piece(source);
}

// Streams what is left of a download after its first piece, one piece at a time, each
// read on the pool and written with back-pressure. A read that fails ends the stream
// without its last chunk, so the client sees a truncated transfer, not a short file.
asio::awaitable<void> stream_rest(state_ptr state, std::shared_ptr<download_source> source,
                                  net::response_stream stream, std::string name) {
  while (!source->at_end) {
    // Named, not temporaries of the co_await: GCC 12 destroys some of those twice.
    std::function<expected<void>()> next = [source] { return read_piece(*source); };
    auto reading = off_the_shard(state, std::move(next));
    auto read = co_await std::move(reading);
    if (!read) {
      log::warn("download of {} failed part way: {}", name, read.error().message);
      stream.abort();
      co_return;
    }
    if (!source->piece.empty() && !co_await stream.write(std::move(source->piece))) {
      co_return; // the client left
    }
  }
  stream.finish();
}

// Answers a download of `f`: one response when it fits a piece, else a chunked stream.
// `extra` headers (CORS) go on either.
asio::awaitable<http_response> file_content(state_ptr state, request_context& ctx,
                                            storage::file_record f,
                                            std::vector<net::http_header> extra = {}) {
  auto source = std::make_shared<download_source>();
  const auto path = state->data_dir / f.storage_path;
  std::function<expected<void>()> open = [source, path] { return open_download(*source, path); };
  auto opening = off_the_shard(state, std::move(open));
  auto opened = co_await std::move(opening);
  if (!opened) {
    if (opened.error().code == errc::not_found) {
      co_return http_response::error(410, "gone", "the file's bytes are missing on the server");
    }
    log::warn("download of file {} failed: {}", f.uuid, opened.error().message);
    co_return http_response::error(500, "internal", "the file could not be read");
  }
  std::vector<net::http_header> headers = {
      {"Content-Disposition", content_disposition(f.name)},
      {"X-Content-Type-Options", "nosniff"},
      {"Cache-Control", "private, no-store"},
  };
  headers.insert(headers.end(), extra.begin(), extra.end());
  if (source->at_end) {
    http_response r;
    r.status = 200;
    r.content_type = f.mime_type;
    r.body = std::move(source->piece);
    r.headers = std::move(headers);
    co_return r;
  }
  auto stream = ctx.begin_stream(200, f.mime_type, std::move(headers));
  stream.try_write(std::move(source->piece));
  source->piece.clear();
  asio::co_spawn(ctx.executor(), stream_rest(state, source, stream, f.uuid),
                 [](const std::exception_ptr& failure) {
                   if (failure) {
                     log::warn("a download stream ended with an exception");
                   }
                 });
  co_return http_response{};
}

asio::awaitable<http_response> upload_file(state_ptr state, request_context& ctx,
                                           api_caller caller) {
  const auto& request = ctx.request();
  const auto limit = state->config.max_upload_bytes;
  // Headers and boundaries of a multipart body are small; a body this much larger than
  // the limit cannot hold a file within it.
  if (request.body.size() > limit + 16 * 1024) {
    co_return http_response::error(413, "payload_too_large",
                                   fmt::format("file: larger than the {} byte limit", limit));
  }
  // The body moves to the heap, shared with the job that stores the file: that job may
  // outlive this handler (its deadline, a client that leaves), and the parts are views.
  auto body = std::make_shared<const std::string>(std::move(ctx.request().body));
  auto parts = net::parse_multipart(request.header("Content-Type"), *body);
  if (!parts) {
    co_return error_response(parts.error());
  }
  const net::form_part* file = nullptr;
  for (const auto& p : *parts) {
    if (p.name == "file") {
      file = &p;
      break;
    }
  }
  if (file == nullptr) {
    co_return http_response::error(400, "invalid_argument",
                                   "file: is required (a form field named \"file\")");
  }
  if (file->data.size() > limit) {
    co_return http_response::error(413, "payload_too_large",
                                   fmt::format("file: larger than the {} byte limit", limit));
  }
  storage::file_record f;
  f.uuid = troupe::new_uuid();
  f.owner_user_id = caller.user_id;
  f.kind = "upload";
  f.name = clean_file_name(file->filename);
  f.mime_type = clean_mime(file->content_type);
  f.size_bytes = static_cast<std::int64_t>(file->data.size());
  const auto dir = state->data_dir / "files";
  // Hashing and writing the bytes (with their fsync) on the blocking pool; what the job
  // finds goes into a shared result, since the job may outlive this handler.
  struct stored_upload {
    std::string sha256;
    std::string name;
  };
  auto result = std::make_shared<stored_upload>();
  auto write_bytes = [body, data = file->data, dir, result]() -> expected<void> {
    result->sha256 = sha256_hex(data);
    auto stored = storage::store_file_bytes(dir, data);
    if (!stored) {
      return tl::unexpected(stored.error());
    }
    result->name = std::move(*stored);
    return {};
  };
  auto writing = off_the_shard(state, std::move(write_bytes));
  auto written = co_await std::move(writing);
  if (!written) {
    ctx.log().error("upload failed: {}", written.error().message);
    co_return error_response(written.error());
  }
  f.sha256 = result->sha256;
  const auto* stored = &result->name;
  f.storage_path = "files/" + *stored;
  f.created_at = storage::now_millis();
  // Awaited as a named value: GCC 12 mishandles temporaries in co_await expressions.
  auto pending = store(state, "store file", [f](auto& c) { return storage::insert_file(c, f); });
  auto id = co_await std::move(pending);
  if (!id) {
    std::error_code ignored;
    std::filesystem::remove(dir / *stored, ignored);
    co_return error_response(id.error());
  }
  json_writer w;
  write_file(w, f, *state);
  co_return http_response::json(201, std::move(w).str());
}

/// The file of the path's `id` when the caller owns it.
expected<storage::file_record> callers_file(const api_state& state, const request_context& ctx,
                                            const api_caller& caller) {
  const std::string uuid(ctx.param("id"));
  return state.reads->with(
      [&](storage::connection& c) { return storage::find_file(c, uuid, caller.user_id); });
}

asio::awaitable<http_response> file_metadata(state_ptr state, request_context& ctx,
                                             api_caller caller) {
  auto f = callers_file(*state, ctx, caller);
  if (!f) {
    co_return http_response::error(404, "not_found", "no such file");
  }
  json_writer w;
  write_file(w, *f, *state);
  co_return http_response::json(200, std::move(w).str());
}

/// `?conversation_id=`: every file of one of the caller's conversations, oldest first, each
/// with the `run_id` of the run that made it (null for an upload). Not paged: a
/// conversation's files are few (at most 20 per message).
asio::awaitable<http_response> conversation_files(state_ptr state, api_caller caller,
                                                  std::string conversation_uuid) {
  auto conversation = read(state, [&](auto& c) {
    return storage::find_conversation_by_uuid(c, conversation_uuid, caller.user_id);
  });
  if (!conversation) {
    co_return conversation.error().code == errc::not_found ? not_found("conversation")
                                                           : error_response(conversation.error());
  }
  auto rows = read(state, [&](auto& c) {
    return storage::list_conversation_files(c, caller.user_id, conversation->id);
  });
  if (!rows) {
    co_return error_response(rows.error());
  }
  json_writer w;
  w.begin_object().key("data").begin_array();
  for (const auto& f : *rows) {
    write_file(w, f.file, *state, f.run_uuid.empty() ? nullptr : &f.run_uuid);
  }
  w.end_array().key("total").value(static_cast<std::int64_t>(rows->size())).end_object();
  co_return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> list_files(state_ptr state, request_context& ctx,
                                          api_caller caller) {
  storage::page p;
  if (auto bad = read_page(ctx.request(), p)) {
    co_return *bad;
  }
  if (const auto conversation = ctx.request().query_param("conversation_id");
      !conversation.empty()) {
    auto answering = conversation_files(state, caller, conversation);
    auto answer = co_await std::move(answering);
    co_return answer;
  }
  // Newest first.
  auto answering = page_off_shard(
      state, p, [=](auto& c) { return storage::list_files_page(c, caller.user_id, p); },
      [=](auto& c) { return storage::count_files(c, caller.user_id); },
      [&](json_writer& w, const storage::file_record& f) { write_file(w, f, *state); });
  auto answer = co_await std::move(answering);
  co_return answer;
}

asio::awaitable<http_response> owner_content(state_ptr state, request_context& ctx,
                                             api_caller caller) {
  auto f = callers_file(*state, ctx, caller);
  if (!f) {
    co_return http_response::error(404, "not_found", "no such file");
  }
  auto answering = file_content(state, ctx, std::move(*f));
  auto answer = co_await std::move(answering);
  co_return answer;
}

// A signed link stands in for the token; without one, the owner's token is required.
asio::awaitable<http_response> download(state_ptr state, net::route_handler with_token,
                                        request_context& ctx) {
  const auto& request = ctx.request();
  const auto sig = request.query_param("sig");
  const auto expires = request.query_param("expires");
  if (sig.empty() && expires.empty()) {
    auto pending = with_token(ctx);
    co_return co_await std::move(pending);
  }
  const std::string uuid(ctx.param("id"));
  std::int64_t until = 0;
  const auto [ptr, ec] = std::from_chars(expires.data(), expires.data() + expires.size(), until);
  http_response response;
  auto* by_address = state->address_limits.get();
  const auto address = ctx.remote_address();
  if (auto wait = by_address ? by_address->retry_after(address) : std::nullopt) {
    // A bad signature counts like a bad token: an address out of attempts is not told
    // whether this one is good.
    response = http_response::error(
        429, "rate_limited",
        fmt::format("too many requests without a valid token from this address; retry in {} s",
                    *wait));
    response.headers.push_back({"Retry-After", std::to_string(*wait)});
  } else if (ec != std::errc{} || ptr != expires.data() + expires.size() ||
             !check_file_signature(state->link_secret, uuid, expires, sig)) {
    if (by_address) {
      by_address->charge(address);
    }
    response = http_response::error(403, "permission_denied", "the link's signature is invalid");
  } else if (until < unix_seconds_now()) {
    response = http_response::error(403, "permission_denied", "the link has expired");
  } else {
    auto f = state->reads->with(
        [&](storage::connection& c) { return storage::find_file_by_uuid(c, uuid); });
    if (f) {
      // A streamed answer's headers go out before the body: CORS is decided up front.
      http_response cors;
      add_cors_headers(state->config, request, cors);
      auto answering = file_content(state, ctx, std::move(*f), std::move(cors.headers));
      auto answer = co_await std::move(answering);
      co_return answer;
    }
    response = http_response::error(404, "not_found", "no such file");
  }
  add_cors_headers(state->config, request, response);
  co_return response;
}

} // namespace

void add_file_routes(route_table& routes) {
  using net::http_method;
  const auto& state = routes.state();
  routes.add(http_method::post, "/api/v1/files", api_access::user, &upload_file);
  routes.add(http_method::get, "/api/v1/files", api_access::user, &list_files);
  routes.add(http_method::get, "/api/v1/files/{id}", api_access::user, &file_metadata);
  auto with_token =
      guard(state, api_access::user, [state](request_context& ctx, const api_caller& caller) {
        return owner_content(state, ctx, caller);
      });
  routes.add_open(
      http_method::get, "/api/v1/files/{id}/content",
      [state, with_token](request_context& ctx) { return download(state, with_token, ctx); });
}

expected<std::string> load_link_secret(const std::filesystem::path& data_dir) {
  const auto path = data_dir / "link.secret";
  if (std::ifstream in(path); in) {
    std::string secret;
    std::getline(in, secret);
    if (secret.size() >= 32) {
      return secret;
    }
  }
  auto bytes = random_bytes(32);
  if (!bytes) {
    return tl::unexpected(bytes.error());
  }
  auto secret = to_hex(*bytes);
  if (auto ok = write_private_file(path, secret + "\n"); !ok) {
    return tl::unexpected(ok.error());
  }
  return secret;
}

namespace {

std::string file_signature(const std::string& secret, std::string_view uuid,
                           std::string_view expires) {
  return to_hex(hmac_sha256(secret, fmt::format("file\n{}\n{}", uuid, expires)));
}

} // namespace

std::string signed_file_link(const std::string& secret, std::string_view uuid,
                             std::int64_t expires) {
  const auto e = std::to_string(expires);
  return fmt::format("/api/v1/files/{}/content?expires={}&sig={}", uuid, e,
                     file_signature(secret, uuid, e));
}

bool check_file_signature(const std::string& secret, std::string_view uuid,
                          std::string_view expires, std::string_view sig) {
  return constant_time_equal(file_signature(secret, uuid, expires), sig);
}

} // namespace troupe::api
