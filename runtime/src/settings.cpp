#include "troupe/runtime/settings.hpp"

#include "tool_config_toml.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include "mcp_toml.hpp"
#include "toml_entry.hpp"

extern char** environ;

namespace troupe {

namespace {

using detail::first_failure;
using detail::toml_entry;
using detail::toml_string;

template <class Int> expected<Int> parse_integer(std::string_view text, Int min, Int max) {
  Int value{};
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) {
    return fail(errc::invalid_argument, fmt::format("'{}' is not a whole number", text));
  }
  if (value < min || value > max) {
    return fail(errc::invalid_argument,
                fmt::format("{} is out of range ({} to {})", value, min, max));
  }
  return value;
}

expected<std::chrono::milliseconds> parse_millis(std::string_view text, std::int64_t min,
                                                 std::int64_t max) {
  return parse_integer<std::int64_t>(text, min, max).map([](std::int64_t v) {
    return std::chrono::milliseconds{v};
  });
}

// A positive rate or size given as a (possibly fractional) number.
expected<double> parse_rate(std::string_view text) {
  double value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty() || !(value > 0) || value > 1e9) {
    return fail(errc::invalid_argument, fmt::format("'{}' is not a positive number", text));
  }
  return value;
}

// A share: a number above 0 and at most 1.
expected<double> parse_fraction(std::string_view text) {
  double value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty() || !(value > 0) || value > 1) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not a share of the window (above 0, at most 1)", text));
  }
  return value;
}

std::string join_commas(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += ',';
    }
    out += item;
  }
  return out;
}

// One key: how to set it from text and how to read it back as TOML text.
struct setting_spec {
  using setter = std::function<expected<void>(settings&, std::string_view)>;
  using getter = std::function<std::string(const settings&)>;

  std::string_view key;
  std::string_view help;
  setter set;
  getter get;
};

setting_spec make_spec(std::string_view key, std::string_view help, setting_spec::setter set,
                       setting_spec::getter get) {
  return setting_spec{key, help, std::move(set), std::move(get)};
}

template <class Int, class Member>
setting_spec integer_spec(std::string_view key, std::string_view help, Member member, Int min,
                          Int max) {
  return {key, help,
          [member, min, max](settings& s, std::string_view text) -> expected<void> {
            auto v = parse_integer<Int>(text, min, max);
            if (!v) {
              return tl::unexpected(v.error());
            }
            std::invoke(member, s) = *v;
            return {};
          },
          [member](const settings& s) {
            return fmt::format("{}", std::invoke(member, const_cast<settings&>(s)));
          }};
}

// A rate (parse_rate) of at least `min`.
template <class Member>
setting_spec rate_spec(std::string_view key, std::string_view help, Member member, double min) {
  return {key, help,
          [member, min](settings& s, std::string_view text) -> expected<void> {
            auto v = parse_rate(text);
            if (!v) {
              return tl::unexpected(v.error());
            }
            if (*v < min) {
              return fail(errc::invalid_argument, fmt::format("must be at least {}", min));
            }
            std::invoke(member, s) = *v;
            return {};
          },
          [member](const settings& s) {
            return fmt::format("{}", std::invoke(member, const_cast<settings&>(s)));
          }};
}

template <class Member>
setting_spec millis_spec(std::string_view key, std::string_view help, Member member,
                         std::int64_t min, std::int64_t max) {
  return {key, help,
          [member, min, max](settings& s, std::string_view text) -> expected<void> {
            auto v = parse_millis(text, min, max);
            if (!v) {
              return tl::unexpected(v.error());
            }
            std::invoke(member, s) = *v;
            return {};
          },
          [member](const settings& s) {
            return fmt::format("{}", std::invoke(member, const_cast<settings&>(s)).count());
          }};
}

/// A true | false key.
template <class Member>
setting_spec bool_spec(std::string_view key, std::string_view help, Member member) {
  return {key, help,
          [member](settings& s, std::string_view text) -> expected<void> {
            if (text != "true" && text != "false") {
              return fail(errc::invalid_argument,
                          fmt::format("'{}' is not a boolean (expected true or false)", text));
            }
            std::invoke(member, s) = text == "true";
            return {};
          },
          [member](const settings& s) {
            return std::string(std::invoke(member, const_cast<settings&>(s)) ? "true" : "false");
          }};
}

const std::vector<setting_spec>& specs() {
  static const std::vector<setting_spec> table = [] {
    std::vector<setting_spec> t;
    t.push_back(make_spec(
        "listen", "HOST:PORT the HTTP server listens on (port 0: any free port)",
        [](settings& s, std::string_view text) -> expected<void> {
          auto e = parse_endpoint(text);
          if (!e) {
            return tl::unexpected(e.error());
          }
          s.listen = *e;
          return {};
        },
        [](const settings& s) { return toml_string(s.listen.to_string()); }));
    t.push_back(make_spec(
        "data_dir", "directory for the database, workspaces and files",
        [](settings& s, std::string_view text) -> expected<void> {
          if (text.empty()) {
            return fail(errc::invalid_argument, "must not be empty");
          }
          s.data_dir = std::filesystem::path(text);
          return {};
        },
        [](const settings& s) { return toml_string(s.data_dir.string()); }));
    t.push_back(make_spec(
        "log_level", "trace | debug | info | warn | error | off",
        [](settings& s, std::string_view text) -> expected<void> {
          auto l = log::parse_level(text);
          if (!l) {
            return tl::unexpected(l.error());
          }
          s.log_level = *l;
          return {};
        },
        [](const settings& s) { return toml_string(log::to_string(s.log_level)); }));
    t.push_back(make_spec(
        "log_format", "text | json (one JSON object per line)",
        [](settings& s, std::string_view text) -> expected<void> {
          auto f = log::parse_format(text);
          if (!f) {
            return tl::unexpected(f.error());
          }
          s.log_format = *f;
          return {};
        },
        [](const settings& s) {
          return toml_string(s.log_format == log::format::json ? "json" : "text");
        }));
    t.push_back(integer_spec<unsigned>(
        "server.io_threads", "threads running network I/O",
        [](settings& s) -> unsigned& { return s.server.io_threads; }, 1u, 64u));
    t.push_back(integer_spec<std::size_t>(
        "server.body_limit_bytes", "largest request body accepted (larger: 413)",
        [](settings& s) -> std::size_t& { return s.server.body_limit_bytes; }, std::size_t{1},
        std::size_t{1} << 34));
    t.push_back(millis_spec(
        "server.request_timeout_ms", "deadline to read a request and answer it (not streams)",
        [](settings& s) -> std::chrono::milliseconds& { return s.server.request_timeout; }, 1,
        86'400'000));
    t.push_back(millis_spec(
        "server.idle_timeout_ms", "how long an idle keep-alive connection stays open",
        [](settings& s) -> std::chrono::milliseconds& { return s.server.idle_timeout; }, 1,
        86'400'000));
    t.push_back(millis_spec(
        "server.shutdown_timeout_ms",
        "on SIGTERM/SIGINT, how long in-flight requests and streams may finish",
        [](settings& s) -> std::chrono::milliseconds& { return s.server.shutdown_timeout; }, 0,
        3'600'000));
    t.push_back(millis_spec(
        "server.sse_ping_interval_ms", "interval of SSE keep-alive pings",
        [](settings& s) -> std::chrono::milliseconds& { return s.server.sse_ping_interval; }, 10,
        3'600'000));
    t.push_back(integer_spec<std::size_t>(
        "server.sse_queue_capacity", "events buffered per SSE client before it counts as slow",
        [](settings& s) -> std::size_t& { return s.server.sse_queue_capacity; }, std::size_t{1},
        std::size_t{1} << 20));
    t.push_back(integer_spec<std::size_t>(
        "server.max_connections", "open connections at most; more are closed at once",
        [](settings& s) -> std::size_t& { return s.server.max_connections; }, std::size_t{1},
        std::size_t{10'000'000}));
    t.push_back(integer_spec<unsigned>(
        "actors.scheduler_threads", "actor scheduler threads (0: one per core)",
        [](settings& s) -> unsigned& { return s.actors.scheduler_threads; }, 0u, 256u));
    t.push_back(make_spec(
        "actors.scheduler_policy", "shards | sharing | stealing",
        [](settings& s, std::string_view text) -> expected<void> {
          if (text != "shards" && text != "sharing" && text != "stealing") {
            return fail(errc::invalid_argument,
                        fmt::format("'{}' is not a scheduler policy (expected "
                                    "shards, sharing or stealing)",
                                    text));
          }
          s.actors.scheduler_policy = std::string(text);
          return {};
        },
        [](const settings& s) { return toml_string(s.actors.scheduler_policy); }));
    t.push_back(integer_spec<std::size_t>(
        "actors.max_throughput", "messages an actor handles before yielding its thread",
        [](settings& s) -> std::size_t& { return s.actors.max_throughput; }, std::size_t{1},
        std::size_t{1'000'000}));
    t.push_back(integer_spec<unsigned>(
        "actors.shards", "shards with scheduler_policy = shards (0: one per core)",
        [](settings& s) -> unsigned& { return s.actors.shards; }, 0u, 256u));
    t.push_back(millis_spec(
        "actors.lag_warn_ms", "a shard's thread held this long by one thing is logged",
        [](settings& s) -> std::chrono::milliseconds& { return s.actors.lag_warn; }, 1, 3'600'000));
    t.push_back(integer_spec<unsigned>(
        "actors.malloc_arenas",
        "glibc malloc arenas for the process (0: two per shard); MALLOC_ARENA_MAX wins",
        [](settings& s) -> unsigned& { return s.actors.malloc_arenas; }, 0u, 1024u));
    t.push_back(millis_spec(
        "actors.conversation_idle_ms", "idle time after which a conversation leaves memory",
        [](settings& s) -> std::chrono::milliseconds& { return s.actors.conversation_idle; }, 1'000,
        86'400'000));
    t.push_back(integer_spec<std::size_t>(
        "actors.history_messages", "earlier messages of a conversation given to each run",
        [](settings& s) -> std::size_t& { return s.actors.history_messages; }, std::size_t{0},
        std::size_t{10'000}));
    t.push_back(integer_spec<std::size_t>(
        "actors.max_pending",
        "messages one conversation lets wait for a run; one more is refused with 429 (0: no "
        "bound)",
        [](settings& s) -> std::size_t& { return s.actors.max_pending; }, std::size_t{0},
        std::size_t{1'000'000}));
    t.push_back(integer_spec<std::uint32_t>(
        "actors.history_max_tokens",
        "estimated tokens of a conversation's earlier turns each prompt carries; the oldest "
        "messages go first (0: only the context window bounds them)",
        [](settings& s) -> std::uint32_t& { return s.actors.history_max_tokens; }, std::uint32_t{0},
        max_context_window));
    t.push_back(millis_spec(
        "actors.channel_typing_cap_ms",
        "the longest a channel thread shows the typing indicator for one stretch of runs",
        [](settings& s) -> std::chrono::milliseconds& { return s.actors.channel_typing_cap; },
        1'000, 3'600'000));
    t.push_back(millis_spec(
        "actors.channel_run_grace_ms",
        "beyond an agent's timeout, how long a channel thread waits for a run's answer before "
        "it answers that the run did not finish (renewed while the run waits for a human)",
        [](settings& s) -> std::chrono::milliseconds& { return s.actors.channel_run_grace; }, 100,
        3'600'000));
    t.push_back(make_spec(
        "storage.synchronous",
        "normal (commits survive a crash) | full (commits survive power loss; slower)",
        [](settings& s, std::string_view text) -> expected<void> {
          if (text != "normal" && text != "full") {
            return fail(
                errc::invalid_argument,
                fmt::format("'{}' is not a synchronous mode (expected normal or full)", text));
          }
          s.storage.synchronous = std::string(text);
          return {};
        },
        [](const settings& s) { return toml_string(s.storage.synchronous); }));
    t.push_back(millis_spec(
        "storage.group_commit_ms", "how long the writer gathers writes into one transaction",
        [](settings& s) -> std::chrono::milliseconds& { return s.storage.group_commit; }, 0,
        1'000));
    t.push_back(integer_spec<std::size_t>(
        "storage.group_commit_max", "writes that end a batch without waiting for the timer",
        [](settings& s) -> std::size_t& { return s.storage.group_commit_max; }, std::size_t{1},
        std::size_t{100'000}));
    t.push_back(integer_spec<unsigned>(
        "storage.read_connections", "read-only database connections in the read pool",
        [](settings& s) -> unsigned& { return s.storage.read_connections; }, 1u, 64u));
    t.push_back(integer_spec<std::size_t>(
        "storage.writer_max_queue",
        "writes admitting new work that may wait for the writer; past it 503 (0: no bound)",
        [](settings& s) -> std::size_t& { return s.storage.writer_max_queue; }, std::size_t{0},
        std::size_t{10'000'000}));
    t.push_back(integer_spec<unsigned>(
        "storage.checkpoint_frames",
        "WAL frames beyond which a checkpoint runs (on its own thread, not in a commit)",
        [](settings& s) -> unsigned& { return s.storage.checkpoint_frames; }, 1u, 1'000'000u));
    t.push_back(integer_spec<unsigned>(
        "storage.wal_restart_frames",
        "WAL frames beyond which the writer copies back the rest itself so that the log "
        "restarts (at least storage.checkpoint_frames)",
        [](settings& s) -> unsigned& { return s.storage.wal_restart_frames; }, 1u, 10'000'000u));
    t.push_back(bool_spec("storage.gather_wal_writes",
                          "write each commit's WAL frames with one system call instead of two "
                          "per page (true | false)",
                          [](settings& s) -> bool& { return s.storage.gather_wal_writes; }));
    t.push_back(rate_spec(
        "api.rate_per_second", "requests per second each token may make on average",
        [](settings& s) -> double& { return s.api.rate_per_second; }, 0.0));
    t.push_back(rate_spec(
        "api.rate_burst", "requests a token may make at once before the rate applies",
        [](settings& s) -> double& { return s.api.rate_burst; }, 1.0));
    t.push_back(rate_spec(
        "api.unauthenticated_rate_per_second",
        "requests without a valid token (and token mints) per second one client address may "
        "make on average; past it 429",
        [](settings& s) -> double& { return s.api.unauthenticated_rate_per_second; }, 0.0));
    t.push_back(rate_spec(
        "api.unauthenticated_rate_burst",
        "requests without a valid token one client address may make at once",
        [](settings& s) -> double& { return s.api.unauthenticated_rate_burst; }, 1.0));
    t.push_back(integer_spec<std::size_t>(
        "api.unauthenticated_max_addresses",
        "client addresses the unauthenticated limit tracks; past it the least recent is "
        "forgotten",
        [](settings& s) -> std::size_t& { return s.api.unauthenticated_max_addresses; },
        std::size_t{1}, std::size_t{10'000'000}));
    t.push_back(integer_spec<std::size_t>(
        "api.max_upload_bytes", "largest uploaded file (larger: 413)",
        [](settings& s) -> std::size_t& { return s.api.max_upload_bytes; }, std::size_t{1},
        std::size_t{1} << 34));
    t.push_back(millis_spec(
        "api.signed_link_ttl_ms", "how long a signed file download link stays valid",
        [](settings& s) -> std::chrono::milliseconds& { return s.api.signed_link_ttl; }, 1000,
        31'536'000'000));
    t.push_back(make_spec(
        "api.cors_origins", "comma-separated origins allowed by CORS, or * (empty: none)",
        [](settings& s, std::string_view text) -> expected<void> {
          s.api.cors_origins.clear();
          while (!text.empty()) {
            const auto comma = text.find(',');
            auto item = text.substr(0, comma);
            while (!item.empty() && item.front() == ' ') {
              item.remove_prefix(1);
            }
            while (!item.empty() && item.back() == ' ') {
              item.remove_suffix(1);
            }
            if (!item.empty()) {
              s.api.cors_origins.emplace_back(item);
            }
            text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
          }
          return {};
        },
        [](const settings& s) { return toml_string(join_commas(s.api.cors_origins)); }));
    t.push_back(bool_spec("api.open_metrics", "serve /metrics without a token (true | false)",
                          [](settings& s) -> bool& { return s.api.open_metrics; }));
    t.push_back(millis_spec(
        "api.run_retention_ms", "how long a finished run's events stay in memory for replay",
        [](settings& s) -> std::chrono::milliseconds& { return s.api.run_retention; }, 0,
        86'400'000));
    t.push_back(integer_spec<std::size_t>(
        "api.journal_max_bytes",
        "bytes all runs' event journals may hold in memory; past it the oldest finished "
        "journals leave memory (replay then comes from the database)",
        [](settings& s) -> std::size_t& { return s.api.journal_max_bytes; }, std::size_t{0},
        std::size_t{1} << 40));
    t.push_back(millis_spec(
        "api.ephemeral_retention_ms",
        "idle time after which a conversation made by /v1/chat/completions is deleted",
        [](settings& s) -> std::chrono::milliseconds& { return s.api.ephemeral_retention; }, 0,
        2'592'000'000));
    t.push_back(bool_spec("tools.allow_host",
                          "run code on the host without the sandbox (true | false; opt-in)",
                          [](settings& s) -> bool& { return s.tools.allow_host; }));
    t.push_back(millis_spec(
        "tools.timeout_ms", "longest a single tool call may take",
        [](settings& s) -> std::chrono::milliseconds& { return s.tools.timeout; }, 100,
        86'400'000));
    t.push_back(integer_spec<std::uint64_t>(
        "tools.workspace_max_bytes",
        "most bytes a workspace may hold; a write or edit past it fails (0: no cap)",
        [](settings& s) -> std::uint64_t& { return s.tools.workspace_max_bytes; }, std::uint64_t{0},
        std::uint64_t{1} << 50));
    t.push_back(integer_spec<std::uint32_t>(
        "tools.approval_timeout_s",
        "seconds a tool call waiting for a human's approval waits before it is denied",
        [](settings& s) -> std::uint32_t& { return s.tools.approval_timeout_s; }, std::uint32_t{1},
        std::uint32_t{7 * 24 * 3600}));
    t.push_back(make_spec(
        "skills.dir", "the folder of skill folders (SKILL.md); empty: <data_dir>/skills",
        [](settings& s, std::string_view text) -> expected<void> {
          s.skills.dir = std::filesystem::path(text);
          return {};
        },
        [](const settings& s) { return toml_string(s.skills.dir.string()); }));
    t.push_back(
        bool_spec("web.fetch_allow_private",
                  "web_fetch may read loopback, private and link-local addresses (true | false)",
                  [](settings& s) -> bool& { return s.web.fetch_allow_private; }));
    t.push_back(millis_spec(
        "web.fetch_timeout_ms", "longest a web_fetch may take, redirects included",
        [](settings& s) -> std::chrono::milliseconds& { return s.web.fetch_timeout; }, 100,
        600'000));
    t.push_back(integer_spec<std::size_t>(
        "web.fetch_max_bytes", "bytes of a page web_fetch reads at most (the rest is cut)",
        [](settings& s) -> std::size_t& { return s.web.fetch_max_bytes; }, std::size_t{1024},
        max_tool_response_bytes));
    t.push_back(integer_spec<std::size_t>(
        "web.fetch_max_chars", "characters of a page's text web_fetch returns at most",
        [](settings& s) -> std::size_t& { return s.web.fetch_max_chars; }, std::size_t{100},
        std::size_t{1'000'000}));
    t.push_back(millis_spec(
        "web.search_timeout_ms", "longest one search engine may take to answer web_search",
        [](settings& s) -> std::chrono::milliseconds& { return s.web.search_timeout; }, 100,
        600'000));
    t.push_back(make_spec(
        "compression.trigger",
        "share of the model's context window the estimated prompt reaches before it is "
        "compressed (above 0, at most 1)",
        [](settings& s, std::string_view text) -> expected<void> {
          auto v = parse_fraction(text);
          if (!v) {
            return tl::unexpected(v.error());
          }
          s.compression.trigger = *v;
          return {};
        },
        [](const settings& s) { return fmt::format("{}", s.compression.trigger); }));
    t.push_back(integer_spec<std::size_t>(
        "compression.protect_head",
        "messages at the start of a conversation that compression always keeps",
        [](settings& s) -> std::size_t& { return s.compression.protect_head; }, std::size_t{0},
        std::size_t{1'000}));
    t.push_back(integer_spec<std::size_t>(
        "compression.protect_tail", "newest messages that compression always keeps",
        [](settings& s) -> std::size_t& { return s.compression.protect_tail; }, std::size_t{0},
        std::size_t{10'000}));
    t.push_back(integer_spec<std::size_t>(
        "compression.min_middle",
        "the fewest messages between the kept head and tail that are worth summarising",
        [](settings& s) -> std::size_t& { return s.compression.min_middle; }, std::size_t{1},
        std::size_t{10'000}));
    t.push_back(integer_spec<unsigned>(
        "blocking.threads",
        "threads for work that may block (tools' file work, off the I/O threads)",
        [](settings& s) -> unsigned& { return s.blocking.threads; }, 1u, 256u));
    return t;
  }();
  return table;
}

const setting_spec* find_spec(std::string_view key) {
  for (const auto& spec : specs()) {
    if (spec.key == key) {
      return &spec;
    }
  }
  return nullptr;
}

std::string env_name_for(std::string_view key) {
  std::string name = "TROUPE_";
  for (const char c : key) {
    name.push_back(c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  return name;
}

// The textual form of a TOML leaf, as a flag or variable would carry it.
expected<std::string> leaf_text(const toml::node& node) {
  if (auto s = node.value<std::string>()) {
    return *s;
  }
  if (node.is_integer()) {
    return fmt::format("{}", *node.value<std::int64_t>());
  }
  if (node.is_boolean()) {
    return std::string(*node.value<bool>() ? "true" : "false");
  }
  if (node.is_floating_point()) {
    return fmt::format("{}", *node.value<double>());
  }
  return fail(errc::invalid_argument, "expected a string, number or boolean");
}

// A list of strings, or the one string "*" (every one): an agent's `skills`.
expected<void> read_list_or_star(toml_entry& r, std::string_view key,
                                 std::vector<std::string>& into) {
  const auto* node = r.take(key);
  if (node == nullptr) {
    return {};
  }
  if (node->is_string()) {
    if (node->value<std::string>() != "*") {
      return r.wrong(key, "\"*\" or an array of strings");
    }
    into = {"*"};
    return {};
  }
  const auto* array = node->as_array();
  if (array == nullptr) {
    return r.wrong(key, "\"*\" or an array of strings");
  }
  std::vector<std::string> out;
  for (const auto& item : *array) {
    auto value = item.value<std::string>();
    if (!value) {
      return r.wrong(key, "\"*\" or an array of strings");
    }
    out.push_back(std::move(*value));
  }
  into = std::move(out);
  return {};
}

// An inline table of approval modes by tool name (`approval = { exec = "always" }`).
expected<void> read_approval_table(toml_entry& r, std::string_view key,
                                   std::map<std::string, approval_mode, std::less<>>& into) {
  const auto* node = r.take(key);
  if (node == nullptr) {
    return {};
  }
  const auto* table = node->as_table();
  if (table == nullptr) {
    return r.wrong(key, "a table of tool = \"never\" | \"agent_initiated\" | \"always\"");
  }
  std::map<std::string, approval_mode, std::less<>> out;
  for (const auto& [tool, value] : *table) {
    auto text = value.value<std::string>();
    auto mode = text ? parse_approval_mode(*text) : parse_approval_mode("");
    if (!mode) {
      return r.wrong(fmt::format("{}.{}", key, tool.str()),
                     "\"never\", \"agent_initiated\" or \"always\"");
    }
    out.emplace(std::string(tool.str()), *mode);
  }
  into = std::move(out);
  return {};
}

// One `[[channels]]` entry (channel_config.hpp); checked as a whole in apply_toml.
expected<void> read_channel(settings& target, toml_entry& r, std::string_view source_name) {
  channel_settings ch;
  std::string type = std::string(to_string(ch.type));
  std::string scope = std::string(to_string(ch.scope));
  std::string policy = std::string(to_string(ch.queue));
  auto ok = first_failure(r.text("name", ch.name), r.text("type", type), r.text("agent", ch.agent),
                          r.text("mode", ch.mode), r.text("token_env", ch.token_env),
                          r.text("token", ch.token), r.text("bot_token_env", ch.bot_token_env),
                          r.text("signing_secret_env", ch.signing_secret_env),
                          r.text("api_base", ch.api_base), r.text("session_scope", scope),
                          r.text("queue_policy", policy), r.text("callback_url", ch.callback_url),
                          r.boolean("stream_edits", ch.stream_edits));
  for (const auto& [field, member] : channel_platform_keys::fields) {
    if (ok) {
      ok = r.text(field, ch.platform.*member);
    }
  }
  if (ok) {
    ok = r.no_unknown_keys();
  }
  if (!ok) {
    return ok;
  }
  auto parsed_type = parse_channel_type(type);
  auto parsed_scope = parse_session_scope(scope);
  auto parsed_policy = parse_queue_policy(policy);
  const error* wrong = !parsed_type     ? &parsed_type.error()
                       : !parsed_scope  ? &parsed_scope.error()
                       : !parsed_policy ? &parsed_policy.error()
                                        : nullptr;
  if (wrong != nullptr) {
    return fail(errc::invalid_argument,
                fmt::format("{}: channel '{}': {}", source_name, ch.name, wrong->message));
  }
  ch.type = *parsed_type;
  ch.scope = *parsed_scope;
  ch.queue = *parsed_policy;
  target.channels.push_back(std::move(ch));
  return {};
}

expected<void> apply_entries(settings& target, std::string_view key, const toml::array& array,
                             std::string_view source_name) {
  for (std::size_t i = 0; i < array.size(); ++i) {
    const auto* table = array[i].as_table();
    if (table == nullptr) {
      return fail(
          errc::invalid_argument,
          fmt::format("{}: '{}' must be an array of tables ([[{}]])", source_name, key, key));
    }
    toml_entry r(*table, key, source_name, i);
    if (key == "providers") {
      provider_settings p;
      std::int64_t context_window = p.context_window;
      auto ok = first_failure(
          r.text("name", p.name), r.text("type", p.type), r.text("base_url", p.base_url),
          r.text("api_key_env", p.api_key_env), r.text("api_key", p.api_key),
          r.text_list("models", p.models),
          r.number("context_window", context_window, min_context_window, max_context_window));
      // After every read: arguments are evaluated in no fixed order.
      if (ok) {
        ok = r.no_unknown_keys();
      }
      if (!ok) {
        return ok;
      }
      p.context_window = static_cast<std::uint32_t>(context_window);
      target.providers.push_back(std::move(p));
    } else if (key == "channels") {
      if (auto ok = read_channel(target, r, source_name); !ok) {
        return ok;
      }
    } else if (key == "tools") {
      auto t = detail::read_tool_entry(*table, source_name, i);
      if (!t) {
        return tl::unexpected(t.error());
      }
      target.custom_tools.push_back(std::move(*t));
    } else if (key == "search_engines") {
      auto e = detail::read_search_engine_entry(*table, source_name, i);
      if (!e) {
        return tl::unexpected(e.error());
      }
      target.search_engines.push_back(std::move(*e));
    } else {
      agent_settings a;
      std::int64_t max_rounds = a.max_rounds;
      std::int64_t timeout_s = a.timeout.count();
      std::string policy = std::string(to_string(a.queue));
      std::int64_t context_window = a.context_window;
      std::int64_t memory_max_items = a.memory_max_items;
      std::int64_t memory_max_chars = a.memory_max_chars;
      std::string web_search = std::string(to_string(a.web_search));
      std::int64_t approval_timeout_s = a.approval_timeout_s;
      auto skills_ok = first_failure(
          read_list_or_star(r, "skills", a.skills), read_approval_table(r, "approval", a.approval),
          r.text("approval_profile", a.approval_profile),
          r.number("approval_timeout_s", approval_timeout_s, 0, 7 * 24 * 3600));
      auto ok = !skills_ok
                    ? skills_ok
                    : first_failure(
                          r.text("name", a.name), r.text("provider", a.provider),
                          r.text("model", a.model), r.text("fast_model", a.fast_model),
                          r.text("fallback_model", a.fallback_model),
                          r.text("system_prompt", a.system_prompt), r.text_list("tools", a.tools),
                          r.number("max_rounds", max_rounds, 1, 10'000),
                          r.number("timeout_s", timeout_s, 1, 7 * 24 * 3600),
                          r.text("queue_policy", policy),
                          r.number("context_window", context_window, min_context_window,
                                   max_context_window),
                          r.boolean("memory", a.memory),
                          r.boolean("memory_autoapprove", a.memory_autoapprove),
                          r.number("memory_max_items", memory_max_items, 1, max_memory_items),
                          r.number("memory_max_chars", memory_max_chars, min_memory_chars,
                                   max_memory_chars),
                          r.text("web_search", web_search));
      if (ok) {
        ok = r.no_unknown_keys();
      }
      if (!ok) {
        return ok;
      }
      auto parsed_policy = parse_queue_policy(policy);
      if (!parsed_policy) {
        return fail(errc::invalid_argument, fmt::format("{}: agent '{}': {}", source_name, a.name,
                                                        parsed_policy.error().message));
      }
      a.queue = *parsed_policy;
      auto parsed_web = parse_web_search_mode(web_search);
      if (!parsed_web) {
        return fail(errc::invalid_argument, fmt::format("{}: agent '{}': {}", source_name, a.name,
                                                        parsed_web.error().message));
      }
      a.web_search = *parsed_web;
      if (auto profile = check_approval_profile(a.approval_profile); !profile) {
        return fail(errc::invalid_argument, fmt::format("{}: agent '{}': {}", source_name, a.name,
                                                        profile.error().message));
      }
      a.approval_timeout_s = static_cast<std::uint32_t>(approval_timeout_s);
      a.max_rounds = static_cast<unsigned>(max_rounds);
      a.timeout = std::chrono::seconds(timeout_s);
      a.context_window = static_cast<std::uint32_t>(context_window);
      a.memory_max_items = static_cast<std::uint32_t>(memory_max_items);
      a.memory_max_chars = static_cast<std::uint32_t>(memory_max_chars);
      target.agents.push_back(std::move(a));
    }
  }
  return {};
}

// `[secrets] allowed_env`: an array of environment variable names (letters, digits and
// '_', not starting with a digit).
expected<void> apply_allowed_env(settings& target, const toml::node& node,
                                 std::string_view source_name) {
  const auto line = node.source().begin.line;
  const auto* array = node.as_array();
  if (array == nullptr) {
    return fail(errc::invalid_argument,
                fmt::format("{}:{}: key 'secrets.allowed_env' must be an array of strings",
                            source_name, line));
  }
  std::vector<std::string> names;
  for (const auto& item : *array) {
    auto name = item.value<std::string>();
    const auto valid_char = [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    };
    if (!name || name->empty() || std::isdigit(static_cast<unsigned char>(name->front())) != 0 ||
        !std::all_of(name->begin(), name->end(), valid_char)) {
      return fail(errc::invalid_argument,
                  fmt::format("{}:{}: key 'secrets.allowed_env': each entry must be an "
                              "environment variable name (letters, digits, '_')",
                              source_name, item.source().begin.line));
    }
    names.push_back(std::move(*name));
  }
  target.secrets.allowed_env = std::move(names);
  return {};
}

expected<void> apply_table(settings& target, const toml::table& table, const std::string& prefix,
                           std::string_view source_name) {
  for (const auto& [raw_key, node] : table) {
    const std::string key =
        prefix.empty() ? std::string(raw_key.str()) : prefix + "." + std::string(raw_key.str());
    if (prefix.empty() && key == "mcp_servers") {
      // [[mcp_servers]] (mcp_config.hpp), read and checked entry by entry there.
      const auto* array = node.as_array();
      if (array == nullptr) {
        return fail(errc::invalid_argument,
                    fmt::format("{}: 'mcp_servers' must be written as [[mcp_servers]] tables",
                                source_name));
      }
      if (auto ok = detail::read_mcp_servers(target.mcp_servers, *array, source_name); !ok) {
        return ok;
      }
      continue;
    }
    // `[[tools]]` (custom tools) is an array; `[tools]` (the tool settings) a table.
    if (prefix.empty() && (key == "providers" || key == "agents" || key == "channels" ||
                           key == "search_engines" || (key == "tools" && node.is_array()))) {
      const auto* array = node.as_array();
      if (array == nullptr) {
        return fail(errc::invalid_argument, fmt::format("{}: '{}' must be written as [[{}]] tables",
                                                        source_name, key, key));
      }
      if (auto ok = apply_entries(target, key, *array, source_name); !ok) {
        return ok;
      }
      continue;
    }
    if (const auto* sub = node.as_table()) {
      auto ok = apply_table(target, *sub, key, source_name);
      if (!ok) {
        return ok;
      }
      continue;
    }
    if (key == "skills.dirs") {
      // File only, like secrets.allowed_env.
      const auto* array = node.as_array();
      std::vector<std::filesystem::path> dirs;
      for (std::size_t k = 0; array != nullptr && k < array->size(); ++k) {
        auto dir = (*array)[k].value<std::string>();
        if (!dir || dir->empty()) {
          array = nullptr;
          break;
        }
        dirs.emplace_back(*dir);
      }
      if (array == nullptr) {
        return fail(errc::invalid_argument,
                    fmt::format("{}:{}: key 'skills.dirs' must be an array of folder paths",
                                source_name, node.source().begin.line));
      }
      target.skills.dirs = std::move(dirs);
      continue;
    }
    if (key.starts_with("skills.runners.")) {
      auto command = node.value<std::string>();
      if (!command || command->find_first_not_of(' ') == std::string::npos) {
        return fail(errc::invalid_argument,
                    fmt::format("{}:{}: key '{}' must be a command (a program and its arguments)",
                                source_name, node.source().begin.line, key));
      }
      target.skills.runners[key.substr(std::string_view("skills.runners.").size())] = *command;
      continue;
    }
    if (key == "secrets.allowed_env") {
      // A list, and a file-only key: not in specs(), so no flag or variable can set it.
      if (auto ok = apply_allowed_env(target, node, source_name); !ok) {
        return ok;
      }
      continue;
    }
    const auto* spec = find_spec(key);
    if (spec == nullptr) {
      const auto& where = raw_key.source().begin;
      return fail(errc::invalid_argument,
                  fmt::format("{}:{}: unknown key '{}'", source_name, where.line, key));
    }
    auto text = leaf_text(node);
    if (!text) {
      return fail(errc::invalid_argument,
                  fmt::format("{}: key '{}': {}", source_name, key, text.error().message));
    }
    auto ok = spec->set(target, *text);
    if (!ok) {
      return fail(errc::invalid_argument,
                  fmt::format("{}: key '{}': {}", source_name, key, ok.error().message));
    }
  }
  return {};
}

} // namespace

std::vector<std::filesystem::path>
skill_settings::folders(const std::filesystem::path& data_dir) const {
  std::vector<std::filesystem::path> out;
  out.push_back(dir.empty() ? data_dir / "skills" : dir);
  for (const auto& d : dirs) {
    if (std::find(out.begin(), out.end(), d) == out.end()) {
      out.push_back(d);
    }
  }
  return out;
}

std::string endpoint::to_string() const {
  if (host.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", host, port);
  }
  return fmt::format("{}:{}", host, port);
}

expected<endpoint> parse_endpoint(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return fail(errc::invalid_argument,
                  fmt::format("'{}' is not HOST:PORT (IPv6 as [::1]:8080)", text));
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return fail(errc::invalid_argument, fmt::format("'{}' is not HOST:PORT", text));
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) {
    return fail(errc::invalid_argument, fmt::format("'{}' has no host", text));
  }
  // Brackets only around an IPv6 host, never inside one: to_string would print an
  // endpoint this function cannot read back (found by fuzz/settings_toml_fuzz: "::]1[:0"
  // printed as "[::]1[]:0").
  if (host.find_first_of("[]") != std::string_view::npos) {
    return fail(errc::invalid_argument,
                fmt::format("'{}' is not HOST:PORT (IPv6 as [::1]:8080)", text));
  }
  auto number = parse_integer<unsigned>(port, 0u, 65535u);
  if (!number) {
    return fail(errc::invalid_argument, fmt::format("'{}': port {}", text, number.error().message));
  }
  return endpoint{std::string(host), static_cast<std::uint16_t>(*number)};
}

std::span<const setting_info> setting_catalog() {
  static const std::vector<setting_info> catalog = [] {
    std::vector<setting_info> out;
    const settings defaults;
    for (const auto& spec : specs()) {
      out.push_back({std::string(spec.key), env_name_for(spec.key), spec.get(defaults),
                     std::string(spec.help)});
    }
    return out;
  }();
  return catalog;
}

expected<void> apply_setting(settings& target, std::string_view key, std::string_view value) {
  const auto* spec = find_spec(key);
  if (spec == nullptr) {
    return fail(errc::invalid_argument, fmt::format("unknown key '{}'", key));
  }
  return spec->set(target, value);
}

expected<settings> apply_toml(settings base, std::string_view toml_text,
                              std::string_view source_name) {
  toml::table parsed;
  try {
    // Debian's toml++ is built with exceptions on: parse errors arrive as parse_error.
    parsed = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& err) {
    // TOML lets no name be both a table and an array of tables: say what to do instead.
    const bool tools_clash = err.description().find("'tools'") != std::string_view::npos;
    return fail(errc::invalid_argument,
                fmt::format("{}:{}:{}: {}{}", source_name, err.source().begin.line,
                            err.source().begin.column, err.description(),
                            tools_clash ? " (a file with [[tools]] entries cannot also have a "
                                          "[tools] table: set tools.* with flags or "
                                          "TROUPE_TOOLS_* variables)"
                                        : ""));
  }
  auto ok = apply_table(base, parsed, "", source_name);
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  // After the whole document: [secrets] may come after the [[providers]] it allows.
  const key_env_policy policy(base.secrets.allowed_env);
  for (const auto& p : base.providers) {
    auto allowed = policy.check(fmt::format("provider '{}': api_key_env", p.name), p.api_key_env);
    if (!allowed) {
      return fail(errc::invalid_argument,
                  fmt::format("{}: {}", source_name, allowed.error().message));
    }
  }
  if (auto valid = validate_channels(base.channels, policy); !valid) {
    return fail(errc::invalid_argument, fmt::format("{}: {}", source_name, valid.error().message));
  }
  // The agents a custom tool names are checked when the node starts: they may also have
  // been created over the API.
  if (auto valid = validate_custom_tools(base.custom_tools, {}, policy); !valid) {
    return fail(errc::invalid_argument, fmt::format("{}: {}", source_name, valid.error().message));
  }
  if (auto valid = validate_search_engines(base.search_engines, policy); !valid) {
    return fail(errc::invalid_argument, fmt::format("{}: {}", source_name, valid.error().message));
  }
  if (auto valid = validate_mcp_servers(base.mcp_servers); !valid) {
    return fail(errc::invalid_argument, fmt::format("{}: {}", source_name, valid.error().message));
  }
  return base;
}

expected<settings> resolve_settings(const setting_sources& sources) {
  settings result;
  if (!sources.config_file.empty()) {
    std::ifstream in(sources.config_file);
    if (!in) {
      return fail(errc::not_found,
                  fmt::format("cannot read config file '{}'", sources.config_file.string()));
    }
    std::stringstream text;
    text << in.rdbuf();
    auto applied = apply_toml(std::move(result), text.str(), sources.config_file.string());
    if (!applied) {
      return applied;
    }
    result = std::move(*applied);
  }
  for (const auto& spec : specs()) {
    const auto env = sources.environment.find(env_name_for(spec.key));
    if (env != sources.environment.end()) {
      auto ok = spec.set(result, env->second);
      if (!ok) {
        return fail(errc::invalid_argument,
                    fmt::format("environment variable {}: {}", env->first, ok.error().message));
      }
    }
  }
  for (const auto& [key, value] : sources.flags) {
    auto ok = apply_setting(result, key, value);
    if (!ok) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return fail(errc::invalid_argument, fmt::format("{}: {}", flag, ok.error().message));
    }
  }
  return result;
}

std::string to_toml(const settings& s) {
  std::string out;
  std::string section;
  const auto list = detail::toml_string_list;
  // The [skills] keys that are no flag (config file only), printed inside the section
  // its flags open: a TOML table is opened once.
  bool skills_printed = false;
  const auto skills_keys = [&] {
    skills_printed = true;
    if (!s.skills.dirs.empty()) {
      std::vector<std::string> dirs;
      for (const auto& d : s.skills.dirs) {
        dirs.push_back(d.string());
      }
      out += fmt::format("dirs = {}\n", list(dirs));
    }
    for (const auto& [ext, command] : s.skills.runners) {
      out += fmt::format("runners.{} = {}\n", ext, toml_string(command));
    }
  };
  for (const auto& spec : specs()) {
    std::string_view key = spec.key;
    const auto dot = key.find('.');
    const std::string key_section =
        dot == std::string_view::npos ? "" : std::string(key.substr(0, dot));
    if (key_section != section) {
      if (section == "skills") {
        skills_keys();
      }
      section = key_section;
      out += fmt::format("\n[{}]\n", section);
    }
    out += fmt::format("{} = {}\n", dot == std::string_view::npos ? key : key.substr(dot + 1),
                       spec.get(s));
  }
  if (section == "skills") {
    skills_keys();
  } else if (!skills_printed && (!s.skills.dirs.empty() || !s.skills.runners.empty())) {
    out += "\n[skills]\n";
    skills_keys();
  }
  if (!s.secrets.allowed_env.empty()) {
    out += fmt::format("\n[secrets]\nallowed_env = {}\n", list(s.secrets.allowed_env));
  }
  for (const auto& p : s.providers) {
    out += fmt::format("\n[[providers]]\nname = {}\ntype = {}\nbase_url = {}\n",
                       toml_string(p.name), toml_string(p.type), toml_string(p.base_url));
    if (!p.api_key_env.empty()) {
      out += fmt::format("api_key_env = {}\n", toml_string(p.api_key_env));
    }
    if (!p.api_key.empty()) {
      out += "# api_key is set (not printed)\n";
    }
    out += fmt::format("models = {}\ncontext_window = {}\n", list(p.models), p.context_window);
  }
  for (const auto& a : s.agents) {
    out += fmt::format("\n[[agents]]\nname = {}\nprovider = {}\nmodel = {}\nfast_model = {}\n"
                       "fallback_model = {}\nsystem_prompt = {}\ntools = {}\nmax_rounds = {}\n"
                       "timeout_s = {}\nqueue_policy = {}\n",
                       toml_string(a.name), toml_string(a.provider), toml_string(a.model),
                       toml_string(a.fast_model), toml_string(a.fallback_model),
                       toml_string(a.system_prompt), list(a.tools), a.max_rounds, a.timeout.count(),
                       toml_string(to_string(a.queue)));
    if (a.context_window != 0) {
      out += fmt::format("context_window = {}\n", a.context_window);
    }
    const agent_settings defaults;
    if (a.memory != defaults.memory || a.memory_autoapprove != defaults.memory_autoapprove ||
        a.memory_max_items != defaults.memory_max_items ||
        a.memory_max_chars != defaults.memory_max_chars) {
      out += fmt::format("memory = {}\nmemory_autoapprove = {}\nmemory_max_items = {}\n"
                         "memory_max_chars = {}\n",
                         a.memory, a.memory_autoapprove, a.memory_max_items, a.memory_max_chars);
    }
    if (a.web_search != defaults.web_search) {
      out += fmt::format("web_search = {}\n", toml_string(to_string(a.web_search)));
    }
    if (!a.skills.empty()) {
      out += fmt::format("skills = {}\n", list(a.skills));
    }
    if (!a.approval.empty()) {
      std::string table;
      for (const auto& [tool, mode] : a.approval) {
        table +=
            fmt::format("{}{} = {}", table.empty() ? "" : ", ", tool, toml_string(to_string(mode)));
      }
      out += fmt::format("approval = {{ {} }}\n", table);
    }
    if (!a.approval_profile.empty()) {
      out += fmt::format("approval_profile = {}\n", toml_string(a.approval_profile));
    }
    if (a.approval_timeout_s != 0) {
      out += fmt::format("approval_timeout_s = {}\n", a.approval_timeout_s);
    }
  }
  for (const auto& ch : s.channels) {
    out += fmt::format("\n[[channels]]\nname = {}\ntype = {}\nagent = {}\n", toml_string(ch.name),
                       toml_string(to_string(ch.type)), toml_string(ch.agent));
    if (ch.type == channel_type::telegram) {
      out += fmt::format("mode = {}\n", toml_string(ch.mode));
    }
    for (const auto& [key, value] :
         {std::pair<std::string_view, const std::string&>{"token_env", ch.token_env},
          {"bot_token_env", ch.bot_token_env},
          {"signing_secret_env", ch.signing_secret_env},
          {"api_base", ch.api_base},
          {"callback_url", ch.callback_url}}) {
      if (!value.empty()) {
        out += fmt::format("{} = {}\n", key, toml_string(value));
      }
    }
    for (const auto& [key, member] : channel_platform_keys::fields) {
      if (!(ch.platform.*member).empty()) {
        out += fmt::format("{} = {}\n", key, toml_string(ch.platform.*member));
      }
    }
    if (!ch.token.empty()) {
      out += "# token is set (not printed)\n";
    }
    out += fmt::format("session_scope = {}\nqueue_policy = {}\nstream_edits = {}\n",
                       toml_string(to_string(ch.scope)), toml_string(to_string(ch.queue)),
                       ch.stream_edits);
  }
  for (const auto& e : s.search_engines) {
    out += fmt::format("\n[[search_engines]]\nname = {}\ntype = {}\nkey_env = {}\nbase_url = {}\n"
                       "enabled = {}\ndefault = {}\n",
                       toml_string(e.name), toml_string(to_string(e.type)), toml_string(e.key_env),
                       toml_string(e.base_url), e.enabled, e.is_default);
  }
  if (!s.custom_tools.empty()) {
    // Not as [[tools]]: the [tools] table above holds the tool settings, and TOML allows
    // only one of the two.
    out += fmt::format("\n# {} custom tool(s) declared with [[tools]]:", s.custom_tools.size());
    for (const auto& t : s.custom_tools) {
      out += fmt::format(" {} ({})", t.name, to_string(t.kind));
    }
    out += "\n";
  }
  out += mcp_servers_toml(s.mcp_servers);
  return out;
}

setting_sources command_line_sources(std::filesystem::path config_file,
                                     std::map<std::string, std::string> flags) {
  setting_sources sources;
  sources.environment = environment_snapshot();
  sources.config_file = std::move(config_file);
  if (sources.config_file.empty()) {
    if (const auto it = sources.environment.find("TROUPE_CONFIG");
        it != sources.environment.end()) {
      sources.config_file = it->second;
    }
  }
  sources.flags = std::move(flags);
  return sources;
}

std::map<std::string, std::string> environment_snapshot() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string_view::npos) {
      env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
    }
  }
  return env;
}

} // namespace troupe
