#include "troupe/bench/scenarios.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <regex>
#include <thread>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/object.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "channel_drivers/channel_driver.hpp"
#include "scenario_support.hpp"
#include "troupe/bench/load_generator.hpp"
#include "troupe/bench/loopback.hpp"
#include "troupe/bench/process_stats.hpp"
#include "troupe/bench/troupe_server.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/sse_parser.hpp"

namespace troupe::bench {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace detail;

namespace {

/// The request URL for a checked target: the chat completions route for a bare origin or
/// an OpenAI-style base URL ending in /v1, else the URL's own path.
std::string chat_url(const loopback_url& u) {
  if (u.target == "/") {
    return u.origin + "/v1/chat/completions";
  }
  if (u.target.ends_with("/v1") || u.target.ends_with("/v1/")) {
    return u.origin + u.target + (u.target.back() == '/' ? "" : "/") + "chat/completions";
  }
  return u.origin + u.target;
}

std::string chat_body(bool stream) {
  return fmt::format(
      R"({{"model":"mock-llm","messages":[{{"role":"user","content":"hello from troupe bench"}}],"stream":{}}})",
      stream ? "true" : "false");
}

request_template chat_template(std::string url, bool stream, unsigned tokens,
                               unsigned token_delay_ms) {
  request_template t;
  t.url = std::move(url);
  t.body = chat_body(stream);
  t.headers = {{"Content-Type", "application/json"},
               {"X-Mock-Tokens", std::to_string(tokens)},
               {"X-Mock-TTFT-Ms", "0"},
               {"X-Mock-Token-Delay-Ms", std::to_string(token_delay_ms)}};
  return t;
}

/// One whole (non-streamed) chat completion; nullopt on a 2xx.
asio::awaitable<std::optional<std::string>>
post_chat(net::http_client& client, const request_template* t, std::chrono::milliseconds timeout) {
  auto pending = send_request(client, t, timeout, nullptr);
  co_return co_await std::move(pending);
}

// -- overhead --

struct overhead_state {
  request_template direct;
  std::optional<request_template> via;
  latency_histogram direct_latency;
  latency_histogram via_latency;
  bool via_first = false;
  /// The end of the warm-up: pairs started before it are not recorded.
  clock_type::time_point record_from;
};

asio::awaitable<std::optional<std::string>>
timed_chat(net::http_client& client, const request_template* t, latency_histogram* into,
           clock_type::time_point record_from, std::chrono::milliseconds timeout,
           std::string label) {
  const auto start = clock_type::now();
  auto failure = co_await post_chat(client, t, timeout);
  if (failure) {
    co_return label + ":" + *failure;
  }
  if (start >= record_from) {
    into->record(clock_type::now() - start);
  }
  co_return std::nullopt;
}

// Sends the pair in alternating order so that neither side always runs on a warmer cache.
asio::awaitable<std::optional<std::string>>
overhead_pair(net::http_client& client, overhead_state* s, std::chrono::milliseconds timeout) {
  if (!s->via) {
    co_return co_await timed_chat(client, &s->direct, &s->direct_latency, s->record_from, timeout,
                                  "direct");
  }
  s->via_first = !s->via_first;
  if (s->via_first) {
    auto f = co_await timed_chat(client, &*s->via, &s->via_latency, s->record_from, timeout, "via");
    auto g = co_await timed_chat(client, &s->direct, &s->direct_latency, s->record_from, timeout,
                                 "direct");
    co_return f ? f : g;
  }
  auto f = co_await timed_chat(client, &s->direct, &s->direct_latency, s->record_from, timeout,
                               "direct");
  auto g = co_await timed_chat(client, &*s->via, &s->via_latency, s->record_from, timeout, "via");
  co_return f ? f : g;
}

expected<void> run_overhead(const scenario_options& o, bench_report& report,
                            request_template direct, std::optional<request_template> via) {
  overhead_state s;
  s.direct = std::move(direct);
  s.via = std::move(via);
  if (!s.via) {
    report.notes.push_back("no --via given: only the direct half ran (straight to the target); "
                           "the added latency needs a second path, e.g. troupe's chat route");
  }
  auto* state = &s;
  workload_fn work = [state](net::http_client& client, std::chrono::milliseconds timeout) {
    return overhead_pair(client, state, timeout);
  };
  load_options lo;
  lo.concurrency = 1;
  lo.timeout = o.timeout;
  lo.duration = o.duration;
  lo.warmup = default_warmup(o.duration);
  lo.progress_label = o.progress ? "overhead" : "";
  s.record_from = clock_type::now() + lo.warmup;
  const auto r = run_load(lo, work);
  report.add(s.via ? "pairs_per_s" : "requests_per_s", r.achieved_rate());
  report.add_latency("direct", s.direct_latency);
  if (s.via) {
    report.add_latency("via", s.via_latency);
    const auto added = [&](double p) {
      return (static_cast<double>(s.via_latency.percentile_ns(p)) -
              static_cast<double>(s.direct_latency.percentile_ns(p))) /
             1e3;
    };
    report.add("added.p50_us", added(50));
    report.add("added.p90_us", added(90));
    report.add("added.p99_us", added(99));
    report.notes.push_back("added.* = percentile of the via path minus the same percentile of the "
                           "direct path (interleaved, concurrency 1)");
  }
  add_errors(report, r);
  return {};
}

// -- throughput --

json::object step_row(double rate, const load_result& r, bool pass) {
  json::object row;
  row["rate"] = rate;
  row["achieved_rate"] = r.achieved_rate();
  row["sent"] = r.sent;
  row["succeeded"] = r.succeeded;
  row["errors"] = r.failed;
  row["p50_us"] = static_cast<double>(r.latency.percentile_ns(50)) / 1e3;
  row["p90_us"] = static_cast<double>(r.latency.percentile_ns(90)) / 1e3;
  row["p99_us"] = static_cast<double>(r.latency.percentile_ns(99)) / 1e3;
  row["p99_9_us"] = static_cast<double>(r.latency.percentile_ns(99.9)) / 1e3;
  row["max_us"] = static_cast<double>(r.latency.max_ns()) / 1e3;
  row["max_send_lag_us"] = static_cast<double>(r.max_send_lag.count()) / 1e3;
  row["pass"] = pass;
  json::object kinds;
  for (const auto& [kind, n] : r.errors_by_kind) {
    kinds[kind] = n;
  }
  row["errors_by_kind"] = std::move(kinds);
  return row;
}

expected<void> run_throughput(const scenario_options& o, bench_report& report,
                              const request_template& t) {
  const auto* tp = &t;
  workload_fn work = [tp](net::http_client& client, std::chrono::milliseconds timeout) {
    return post_chat(client, tp, timeout);
  };
  load_options lo;
  lo.duration = o.duration;
  lo.warmup = default_warmup(o.duration);
  lo.timeout = o.timeout;
  const auto bound_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(o.p99_bound).count());
  report.add("p99_bound_us", static_cast<double>(o.p99_bound.count()));
  if (o.rate > 0 || o.concurrency > 0) {
    lo.rate = o.rate;
    lo.concurrency = o.concurrency ? o.concurrency : 1;
    lo.progress_label = o.progress ? "throughput" : "";
    const auto r = run_load(lo, work);
    const bool pass = r.failed == 0 && r.latency.percentile_ns(99) < bound_ns;
    report.steps.push_back(step_row(o.rate, r, pass));
    report.add("rate", o.rate);
    report.add("concurrency", o.rate > 0 ? 0.0 : static_cast<double>(lo.concurrency));
    report.add("achieved_rate", r.achieved_rate());
    report.add_latency("latency", r.latency);
    add_errors(report, r);
    report.notes.push_back(o.rate > 0 ? "one open-loop step at the given --rate (no search)"
                                      : "one closed-loop step at the given --concurrency");
    return {};
  }
  // Search: double from 250/s while steps pass, then bisect between the last pass and the
  // first failure. Each step is a fresh open-loop run of `duration`.
  double best = 0;
  std::optional<load_result> best_result;
  bool first_step = true;
  auto attempt = [&](double rate, bool retry) {
    if (!first_step) {
      // Let the target drain what an overloaded step left behind (abandoned requests it
      // still answers), so that one step's backlog is not charged to the next.
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    first_step = false;
    lo.rate = rate;
    lo.progress_label = o.progress ? fmt::format("throughput {:.0f}/s", rate) : "";
    auto r = run_load(lo, work);
    const bool pass =
        r.failed == 0 && r.latency.count() > 0 && r.latency.percentile_ns(99) < bound_ns;
    const auto failed = r.failed;
    auto row = step_row(rate, r, pass);
    row["retry"] = retry;
    report.steps.push_back(std::move(row));
    if (pass && rate > best) {
      best = rate;
      best_result = std::move(r);
    }
    return std::pair{pass, failed};
  };
  // A step that misses only the latency bound is tried once more: on a shared machine a
  // single stall of another process can push one step's p99 past the bound.
  auto step = [&](double rate) {
    const auto [pass, errors] = attempt(rate, false);
    if (pass || errors > 0) {
      return pass;
    }
    return attempt(rate, true).first;
  };
  double rate = 250;
  double failed_at = 0;
  for (int i = 0; i < 10; ++i, rate *= 2) {
    if (!step(rate)) {
      failed_at = rate;
      break;
    }
  }
  if (failed_at > 0) {
    double lo_rate = best;
    double hi_rate = failed_at;
    for (int i = 0; i < 4 && hi_rate - lo_rate > std::max(25.0, lo_rate * 0.05); ++i) {
      const double mid = std::round((lo_rate + hi_rate) / 2);
      if (step(mid)) {
        lo_rate = mid;
      } else {
        hi_rate = mid;
      }
    }
  }
  report.add("best_rate", best);
  report.add("first_failing_rate", failed_at);
  if (best_result) {
    report.add("at_best.achieved_rate", best_result->achieved_rate());
    report.add_latency("at_best", best_result->latency);
  } else {
    report.notes.push_back("no step passed: even 250/s missed the p99 bound or had errors");
  }
  report.notes.push_back(
      fmt::format("latency is measured from each request's intended send time (open loop); a step "
                  "passes with zero errors and p99 < {} us",
                  o.p99_bound.count()));
  return {};
}

// -- stream --

struct stream_state {
  request_template request;
  /// Until the first SSE event of any kind (the role-only chunk): response latency.
  latency_histogram first_event;
  /// Until the first chunk with answer text.
  latency_histogram ttft;
  latency_histogram gap;
  /// Words of answer text received (the mock's tokens).
  std::uint64_t tokens = 0;
  /// Chunks that carried text (as many as tokens unless a relay merged some).
  std::uint64_t chunks = 0;
  std::uint64_t streams = 0;
};

// The words of answer text a chunk carries (0 for the role-only first chunk). mock-llm
// sends one word (with its leading space) per token; a relay may merge several tokens of
// one read into one chunk, so words, not chunks, count the tokens relayed.
std::size_t content_words(std::string_view data) {
  constexpr std::string_view key = "\"content\":\"";
  const auto at = data.find(key);
  if (at == std::string_view::npos) {
    return 0;
  }
  std::size_t words = 0;
  bool in_word = false;
  for (auto i = at + key.size(); i < data.size(); ++i) {
    const char c = data[i];
    if (c == '"') {
      break;
    }
    bool space = c == ' ';
    if (c == '\\') {
      // An escape: \n, \t and \r separate words, anything else (\", \uXXXX) is part of one.
      ++i;
      const char e = i < data.size() ? data[i] : 'n';
      space = e == 'n' || e == 't' || e == 'r';
    }
    if (!space && !in_word) {
      ++words;
    }
    in_word = !space;
  }
  return words;
}

asio::awaitable<std::optional<std::string>> one_stream(net::http_client& client, stream_state* s,
                                                       std::chrono::milliseconds timeout) {
  const auto start = clock_type::now();
  auto opened = co_await client.open(make_request(s->request, timeout));
  if (!opened) {
    co_return error_kind(opened.error());
  }
  if (opened->status() != 200) {
    co_return fmt::format("http_{}", opened->status());
  }
  net::sse_parser parser;
  std::string bytes;
  std::optional<clock_type::time_point> last;
  bool done = false;
  bool seen_event = false;
  for (;;) {
    bytes.clear();
    auto more = co_await opened->read(bytes);
    if (!more) {
      co_return error_kind(more.error());
    }
    if (!*more) {
      break;
    }
    const auto now = clock_type::now();
    auto fed = parser.feed(bytes, [&](const net::sse_message& m) {
      if (!seen_event) {
        seen_event = true;
        s->first_event.record(now - start);
      }
      if (m.data == "[DONE]") {
        done = true;
      } else if (const auto words = content_words(m.data); words > 0) {
        if (last) {
          s->gap.record(now - *last);
        } else {
          s->ttft.record(now - start);
        }
        last = now;
        s->tokens += words;
        ++s->chunks;
      }
    });
    if (!fed) {
      co_return "parse_error";
    }
  }
  if (!done) {
    co_return "truncated";
  }
  ++s->streams;
  co_return std::nullopt;
}

struct stream_phase_result {
  std::unique_ptr<stream_state> state;
  load_result load;
};

stream_phase_result stream_phase(const scenario_options& o, const request_template& request,
                                 unsigned tokens, unsigned delay, const std::string& label) {
  stream_phase_result out{std::make_unique<stream_state>(), {}};
  out.state->request = request;
  auto* sp = out.state.get();
  workload_fn work = [sp](net::http_client& client, std::chrono::milliseconds timeout) {
    return one_stream(client, sp, timeout);
  };
  load_options lo;
  lo.concurrency = o.concurrency ? o.concurrency : 64;
  lo.duration = o.duration;
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(tokens * delay + 5'000));
  lo.progress_label = o.progress ? label : "";
  out.load = run_load(lo, work);
  return out;
}

double tokens_per_s(const stream_phase_result& r) {
  const double seconds = std::chrono::duration<double>(r.load.elapsed).count();
  return seconds > 0 ? static_cast<double>(r.state->tokens) / seconds : 0.0;
}

expected<void> run_stream(const scenario_options& o, bench_report& report,
                          const request_template& loaded, std::optional<request_template> direct) {
  const unsigned delay = o.fire_hose ? 0 : o.token_delay_ms;
  const unsigned tokens = o.tokens ? o.tokens : (o.fire_hose ? 1024 : 64);
  const std::string label = o.fire_hose ? "stream fire-hose" : "stream";
  std::optional<stream_phase_result> baseline;
  if (direct) {
    baseline = stream_phase(o, *direct, tokens, delay, label + " direct");
    // Let the mock close what the direct phase left open before the via phase starts.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const auto r = stream_phase(o, loaded, tokens, delay, direct ? label + " via" : label);
  const auto& s = *r.state;
  report.add("concurrency", o.concurrency ? o.concurrency : 64);
  report.add("tokens_per_stream", tokens);
  report.add("token_delay_ms", delay);
  report.add("streams_completed", static_cast<double>(s.streams));
  report.add("tokens_received", static_cast<double>(s.tokens));
  report.add("text_chunks_received", static_cast<double>(s.chunks));
  report.add("tokens_per_s", tokens_per_s(r));
  report.add_latency("first_event", s.first_event);
  report.add_latency("ttft", s.ttft);
  report.add_latency("gap", s.gap);
  report.add_latency("stream_duration", r.load.latency);
  add_errors(report, r.load);
  if (baseline) {
    const auto& d = *baseline->state;
    report.add("direct.streams_completed", static_cast<double>(d.streams));
    report.add("direct.tokens_per_s", tokens_per_s(*baseline));
    report.add_latency("direct.first_event", d.first_event);
    report.add_latency("direct.ttft", d.ttft);
    report.add_latency("direct.gap", d.gap);
    report.add("direct.errors", static_cast<double>(baseline->load.failed));
    const auto added = [](const latency_histogram& via, const latency_histogram& base, double p) {
      return (static_cast<double>(via.percentile_ns(p)) -
              static_cast<double>(base.percentile_ns(p))) /
             1e3;
    };
    for (const double p : {50.0, 99.0}) {
      const auto suffix = p == 50 ? "p50_us" : "p99_us";
      report.add(fmt::format("added.first_event.{}", suffix),
                 added(s.first_event, d.first_event, p));
      report.add(fmt::format("added.ttft.{}", suffix), added(s.ttft, d.ttft, p));
      report.add(fmt::format("added.gap.{}", suffix), added(s.gap, d.gap, p));
    }
    report.notes.push_back(
        "with --via the same load ran twice, straight to the mock (direct.*) and then through "
        "the via path (the unprefixed figures); added.* = via percentile minus the direct one");
  }
  report.notes.push_back(
      "TTFT (first chunk with text) and the gaps between chunks with text are measured at the "
      "client, end to end; events that arrive in one read share a timestamp (gap 0); tokens "
      "are counted as words of text, a chunk may carry several. mock-llm sends a "
      "role-only chunk at once and paces the text after it, so TTFT includes one token "
      "delay; first_event is the response latency");
  return {};
}

// One request before the run, so that a dead target is one clear error, not a report of
// nothing but errors.
expected<void> preflight(const request_template& t) {
  asio::io_context io(1);
  net::http_client client(io.get_executor());
  auto done =
      asio::co_spawn(io, post_chat(client, &t, std::chrono::milliseconds(5'000)), asio::use_future);
  io.run();
  const auto failure = done.get();
  if (failure) {
    return fail(errc::unavailable,
                fmt::format("target {} does not answer a chat completion ({})", t.url, *failure));
  }
  return {};
}

json::object options_json(const scenario_options& o) {
  json::object j;
  j["rate"] = o.rate;
  j["concurrency"] = o.concurrency;
  j["duration_ms"] = o.duration.count();
  j["timeout_ms"] = o.timeout.count();
  j["p99_bound_us"] = o.p99_bound.count();
  j["tokens"] = o.tokens;
  j["token_delay_ms"] = o.token_delay_ms;
  j["fire_hose"] = o.fire_hose;
  j["runs"] = o.runs;
  j["conversations"] = o.conversations;
  if (o.scenario == "agent") {
    j["task"] = o.task;
  }
  if (o.scenario == "channel") {
    j["channel_type"] = o.channel_type.empty() ? "webhook" : o.channel_type;
    json::array users;
    for (const auto n : o.users) {
      users.emplace_back(n);
    }
    j["users"] = std::move(users);
    j["warmup_messages"] = o.warmup_messages;
    j["peers"] = o.peers_dir;
  }
  json::array settings;
  for (const auto& kv : o.troupe_settings) {
    settings.emplace_back(kv);
  }
  j["troupe_settings"] = std::move(settings);
  return j;
}

bool is_chat_api_scenario(std::string_view name) {
  return name == "agent" || name == "storage" || name == "idle" || name == "channel";
}

/// The OpenAI-compatible base URL (…/v1) behind a chat completions URL.
expected<std::string> provider_base(const std::string& completions_url) {
  constexpr std::string_view suffix = "/chat/completions";
  if (!completions_url.ends_with(suffix)) {
    return fail(errc::invalid_argument,
                fmt::format("cannot derive a provider base URL from {} for troupe (give "
                            "--target as http://HOST:PORT or http://HOST:PORT/v1)",
                            completions_url));
  }
  return completions_url.substr(0, completions_url.size() - suffix.size());
}

/// The via path through troupe: its OpenAI-compatible route, model = the tool-less agent.
request_template troupe_chat_template(const troupe_server& troupe, bool stream) {
  request_template t;
  t.url = troupe.origin() + "/v1/chat/completions";
  t.body = fmt::format(
      R"({{"model":"{}","messages":[{{"role":"user","content":"hello from troupe bench"}}],"stream":{}}})",
      chat_agent_name, stream ? "true" : "false");
  t.headers = {troupe.authorization(), {"Content-Type", "application/json"}};
  return t;
}

/// Runs overhead, throughput or stream: against the mock (in-process or --target), with
/// an optional second path (a URL, or troupe).
expected<void> run_model_scenario(const scenario_options& o, bench_report& report) {
  const bool stream = o.scenario == "stream";
  const unsigned delay = stream ? (o.fire_hose ? 0 : o.token_delay_ms) : 0;
  const unsigned tokens = o.tokens ? o.tokens : (stream ? (o.fire_hose ? 1024 : 64) : 16);
  // troupe calls the mock without the bench's X-Mock-* headers, so the mock's own
  // defaults are set to what the headers ask for: both paths get the same answer.
  mock::mock_llm_options mock_options;
  mock_options.tokens = tokens;
  mock_options.token_delay_ms = delay;
  local_mock mock(std::move(mock_options));
  std::string target_url;
  if (o.target.empty()) {
    auto started = mock.start();
    if (!started) {
      return tl::unexpected(started.error());
    }
    target_url = *started + "/v1/chat/completions";
    report.targets["target"] = target_url;
    report.targets["target_kind"] = "mock-llm started in-process on 127.0.0.1:0";
  } else {
    target_url = chat_url(*check_loopback_url(o.target));
    report.targets["target"] = target_url;
    report.targets["target_kind"] = "given by --target";
  }
  const auto direct = chat_template(target_url, stream, tokens, delay);
  std::optional<request_template> via;
  std::unique_ptr<troupe_server> troupe;
  if (o.via == "troupe") {
    auto base = provider_base(target_url);
    if (!base) {
      return tl::unexpected(base.error());
    }
    troupe_setup setup;
    setup.provider_base_url = *base;
    setup.agents = {{std::string(chat_agent_name), {}, 4}};
    auto opened = open_troupe(o, setup);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    troupe = std::move(*opened);
    via = troupe_chat_template(*troupe, stream);
    report.targets["via"] = via->url;
    report.targets["via_kind"] = fmt::format(
        "troupe's OpenAI-compatible route, model = agent '{}' (no tools: one LLM round through "
        "the run actor); troupe's provider is the target mock",
        chat_agent_name);
    report.targets["troupe"] = troupe->describe();
    if (!o.target.empty()) {
      report.notes.push_back("with --target, troupe's requests to the mock carry no X-Mock-* "
                             "headers: both paths answer alike only if that mock's defaults "
                             "match --tokens / --token-delay-ms");
    }
  } else if (!o.via.empty()) {
    via = chat_template(chat_url(*check_loopback_url(o.via)), stream, tokens, delay);
    report.targets["via"] = via->url;
  }
  // Preflight whole (non-streamed) requests on every path used.
  auto probe = [](request_template t) {
    t.body = std::regex_replace(t.body, std::regex(R"("stream":true)"), R"("stream":false)");
    return preflight(t);
  };
  if (auto ok = probe(direct); !ok && (!via || o.scenario == "overhead" || stream)) {
    return tl::unexpected(ok.error());
  }
  if (via) {
    if (auto ok = probe(*via); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  std::optional<std::chrono::microseconds> cpu_before;
  if (troupe && troupe->pid() > 0) {
    if (auto cpu = read_process_cpu(troupe->pid()); cpu) {
      cpu_before = *cpu;
    }
  }
  expected<void> ran;
  if (o.scenario == "overhead") {
    ran = run_overhead(o, report, direct, via);
  } else if (o.scenario == "throughput") {
    ran = run_throughput(o, report, via ? *via : direct);
  } else {
    ran = run_stream(o, report, via ? *via : direct,
                     via ? std::optional<request_template>(direct) : std::nullopt);
  }
  if (!ran) {
    return tl::unexpected(ran.error());
  }
  if (troupe && troupe->pid() > 0) {
    if (auto m = read_process_memory(troupe->pid()); m) {
      report.add("troupe.rss_end_kib", static_cast<double>(m->rss_kib));
      report.add("troupe.rss_peak_kib", static_cast<double>(m->hwm_kib));
    }
    if (auto cpu = read_process_cpu(troupe->pid()); cpu && cpu_before) {
      report.add("troupe.cpu_s", static_cast<double>((*cpu - *cpu_before).count()) / 1e6);
    }
  }
  if (troupe) {
    if (const int status = troupe->stop(std::chrono::seconds(10)); status != 0) {
      report.notes.push_back(fmt::format("troupe exited with status {} at the end", status));
    }
  }
  return {};
}

} // namespace

const std::vector<std::string_view>& scenario_names() {
  static const std::vector<std::string_view> names = {"overhead", "throughput", "stream", "agent",
                                                      "storage",  "idle",       "channel"};
  return names;
}

expected<void> validate(const scenario_options& o) {
  const auto& names = scenario_names();
  if (std::find(names.begin(), names.end(), o.scenario) == names.end()) {
    return fail(errc::invalid_argument, fmt::format("unknown scenario '{}' (known: {})", o.scenario,
                                                    fmt::join(names, ", ")));
  }
  for (const auto& url : {o.target, o.via == "troupe" ? std::string() : o.via, o.troupe_url}) {
    if (!url.empty()) {
      if (auto checked = check_loopback_url(url); !checked) {
        return tl::unexpected(checked.error());
      }
    }
  }
  for (const auto& kv : o.troupe_settings) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
      return fail(errc::invalid_argument,
                  fmt::format("--troupe-set '{}': expected KEY=VALUE (a dotted config key and a "
                              "TOML value)",
                              kv));
    }
  }
  if (!o.channel_type.empty()) {
    const auto& types = detail::channel_driver_types();
    if (o.scenario != "channel") {
      return fail(errc::invalid_argument, "--channel-type is for the channel scenario");
    }
    if (std::find(types.begin(), types.end(), o.channel_type) == types.end()) {
      return fail(errc::invalid_argument,
                  fmt::format("--channel-type '{}' is not one the bench drives ({})",
                              o.channel_type, fmt::join(types, ", ")));
    }
  }
  if (!o.troupe_url.empty() && o.troupe_token.empty()) {
    return fail(errc::invalid_argument, "--troupe needs --token (an admin token of that server)");
  }
  if (is_chat_api_scenario(o.scenario)) {
    if (!o.target.empty() || !o.via.empty()) {
      return fail(errc::invalid_argument,
                  fmt::format("scenario '{}' runs against troupe with a mock-llm it starts itself "
                              "(it needs the scenario's script): no --target or --via; use "
                              "--troupe URL --token T for a running troupe",
                              o.scenario));
    }
    if (o.rate > 0) {
      return fail(errc::invalid_argument,
                  fmt::format("scenario '{}' is closed-loop: no --rate", o.scenario));
    }
    return {};
  }
  if (!o.troupe_url.empty() && o.via != "troupe") {
    return fail(errc::invalid_argument,
                "--troupe names the troupe of --via troupe; give --via troupe as well");
  }
  if (o.scenario == "overhead" && (o.rate > 0 || o.concurrency > 1)) {
    return fail(errc::invalid_argument,
                "overhead runs interleaved at concurrency 1 by design; --rate and "
                "--concurrency apply to throughput and stream");
  }
  if (o.scenario == "stream" && o.rate > 0) {
    return fail(errc::invalid_argument,
                "stream is closed-loop: give --concurrency (concurrent streams), not --rate");
  }
  if (o.rate > 0 && o.concurrency > 0) {
    return fail(errc::invalid_argument, "give --rate (open loop) or --concurrency (closed "
                                        "loop), not both");
  }
  if (o.duration.count() <= 0) {
    return fail(errc::invalid_argument, "--duration must be positive");
  }
  return {};
}

expected<bench_report> run_scenario(const scenario_options& o) {
  if (auto ok = validate(o); !ok) {
    return tl::unexpected(ok.error());
  }
  bench_report report;
  report.scenario = o.scenario;
  report.command_line = o.command_line;
  report.machine = machine_info();
  report.options = options_json(o);
  expected<void> ran;
  if (o.scenario == "agent") {
    ran = run_agent(o, report);
  } else if (o.scenario == "storage") {
    ran = run_storage(o, report);
  } else if (o.scenario == "idle") {
    ran = run_idle(o, report);
  } else if (o.scenario == "channel") {
    ran = run_channel(o, report);
  } else {
    ran = run_model_scenario(o, report);
  }
  if (!ran) {
    return tl::unexpected(ran.error());
  }
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) == 3) {
    report.machine["load_average_end"] = json::array{load[0], load[1], load[2]};
  }
  return report;
}

} // namespace troupe::bench
