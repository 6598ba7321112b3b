#include "troupe/mock/mock_llm_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "answer_encoding.hpp"
#include "answer_plan.hpp"
#include "text_scan.hpp"
#include "troupe/net/wire_encode.hpp"
#include "troupe/runtime/json_writer.hpp"

namespace troupe::mock {

namespace asio = boost::asio;

using net::http_method;
using net::http_response;
using net::request_context;
using net::response_stream;
using net::wire_format;

struct mock_llm_server::state {
  explicit state(mock_llm_options o) : options(std::move(o)) {}
  mock_llm_options options;
  net::http_server* server = nullptr;
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> openai{0};
  std::atomic<std::uint64_t> anthropic{0};
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> abandoned{0};
  std::atomic<std::uint64_t> chunks{0};
  std::atomic<std::int64_t> active{0};
};

namespace {

using state_ptr = std::shared_ptr<mock_llm_server::state>;

asio::awaitable<void> sleep_ms(unsigned ms) {
  if (ms == 0) {
    co_return;
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::milliseconds(ms));
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

// Writes a prepared answer as a stream, injecting the fault.
asio::awaitable<void> pump_answer(state_ptr st, response_stream out,
                                  std::vector<std::string> events, unsigned ttft_ms,
                                  unsigned delay_ms, mock_fault fault) {
  st->started.fetch_add(1, std::memory_order_relaxed);
  st->active.fetch_add(1, std::memory_order_relaxed);
  bool abandoned = false;
  if (fault.type == mock_fault::kind::no_done) {
    events.pop_back(); // [DONE] or message_stop
  }
  co_await sleep_ms(ttft_ms);
  std::string batch;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i == fault.after_chunks) {
      if (fault.type == mock_fault::kind::reset) {
        // Let the chunks already queued reach the client, then reset the connection: the
        // server drops a stream's queue on abort.
        co_await sleep_ms(20);
        out.abort();
        abandoned = true; // counted as a fault, not as a completed stream
        break;
      }
      if (fault.type == mock_fault::kind::malformed) {
        co_await out.write(detail::malformed_chunk());
      }
      if (fault.type == mock_fault::kind::stall) {
        co_await sleep_ms(fault.stall_ms);
      }
    }
    bool ok = true;
    if (fault.type == mock_fault::kind::split) {
      const std::string_view all = events[i];
      for (std::size_t at = 0; at < all.size() && ok; at += fault.split_bytes) {
        std::string piece(all.substr(at, fault.split_bytes));
        ok = co_await out.write(std::move(piece));
        co_await sleep_ms(1); // so that the pieces leave as separate writes
      }
    } else if (delay_ms == 0) {
      // Without pacing, events are coalesced into writes of up to 4 KiB, as a busy server's
      // socket would coalesce them; each stays its own SSE event.
      batch.append(events[i]);
      const bool fault_next = i + 1 == fault.after_chunks && fault.type != mock_fault::kind::none;
      if (batch.size() >= 4096 || i + 1 == events.size() || fault_next) {
        ok = co_await out.write(std::move(batch));
        batch = std::string();
      }
    } else {
      ok = co_await out.write(std::move(events[i]));
    }
    if (!ok) {
      abandoned = true;
      st->abandoned.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    st->chunks.fetch_add(1, std::memory_order_relaxed);
    if (delay_ms > 0 && i + 1 < events.size()) {
      co_await sleep_ms(delay_ms);
    }
  }
  if (!abandoned) {
    out.finish();
    st->completed.fetch_add(1, std::memory_order_relaxed);
  }
  st->active.fetch_sub(1, std::memory_order_relaxed);
}

asio::awaitable<http_response> answer(request_context& ctx, state_ptr st, wire_format format) {
  st->requests.fetch_add(1, std::memory_order_relaxed);
  (format == wire_format::openai ? st->openai : st->anthropic)
      .fetch_add(1, std::memory_order_relaxed);
  const auto call = st->calls.fetch_add(1) + 1;
  if (st->options.observe) {
    st->options.observe(ctx.request().body);
  }
  auto parsed = detail::parse_request(ctx.request().body);
  if (!parsed) {
    co_return detail::error_response(format, 400, "invalid_request_error",
                                     "mock-llm: " + parsed.error().message);
  }
  const auto& options = st->options;
  const mock_rule* rule = detail::find_rule(options, *parsed, call);
  mock_fault fault = rule ? rule->fault : mock_fault{};
  if (const auto spec = ctx.request().header("X-Mock-Fault"); !spec.empty()) {
    auto f = parse_mock_fault(spec);
    if (!f) {
      co_return detail::error_response(format, 400, "invalid_request_error",
                                       "mock-llm: " + f.error().message);
    }
    fault = *f;
  }
  if (fault.type == mock_fault::kind::none) {
    fault = draw_mock_fault(options.random_faults, options.random_fault_rate,
                            options.random_fault_seed, call);
  }
  if (auto until = detail::parse_unsigned(ctx.request().header("X-Mock-Fault-Until"))) {
    fault.until_call = *until;
  }
  if (fault.until_call != 0 && call > fault.until_call) {
    fault.type = mock_fault::kind::none;
  }
  if (fault.type != mock_fault::kind::none) {
    st->faults.fetch_add(1, std::memory_order_relaxed);
  }
  switch (fault.type) {
    case mock_fault::kind::rate_limit: {
      auto r = detail::error_response(format, 429, "rate_limit_error",
                                      "mock-llm: rate limited (injected fault)");
      r.headers.push_back({"retry-after", std::to_string(fault.retry_after_s)});
      co_return r;
    }
    case mock_fault::kind::server_error:
      co_return detail::error_response(format, 500,
                                       format == wire_format::openai ? "server_error" : "api_error",
                                       "mock-llm: internal error (injected fault)");
    case mock_fault::kind::auth:
      co_return detail::error_response(format, 401, "authentication_error",
                                       "mock-llm: invalid API key (injected fault)");
    default:
      break;
  }
  const mock_knobs none;
  const auto& k = rule ? rule->knobs : none;
  const auto& req = ctx.request();
  const unsigned ttft = detail::knob(req, "X-Mock-TTFT-Ms", k.ttft_ms, options.ttft_ms);
  const unsigned delay =
      detail::knob(req, "X-Mock-Token-Delay-Ms", k.token_delay_ms, options.token_delay_ms);
  auto plan = detail::make_plan(options, *parsed, rule, req, format, call);
  if (!parsed->stream) {
    co_await sleep_ms(ttft);
    co_return http_response::json(200, detail::whole_body(plan));
  }
  auto events =
      format == wire_format::openai ? detail::openai_events(plan) : detail::anthropic_events(plan);
  auto stream = ctx.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  asio::co_spawn(ctx.executor(),
                 pump_answer(st, std::move(stream), std::move(events), ttft, delay, fault),
                 asio::detached);
  co_return http_response{};
}

asio::awaitable<http_response> list_models(state_ptr st) {
  st->requests.fetch_add(1, std::memory_order_relaxed);
  co_return http_response::json(200,
                                net::encode_model_list({st->options.model}, "troupe-mock-llm"));
}

asio::awaitable<http_response> report(const mock_llm_server* server) {
  co_return http_response::json(200, server->stats_json());
}

} // namespace

mock_llm_server::mock_llm_server(asio::io_context& io, mock_llm_options options)
    : state_(std::make_shared<state>(std::move(options))),
      metrics_(std::make_unique<metrics_registry>()) {
  net::router routes;
  auto st = state_;
  routes.add(http_method::post, "/v1/chat/completions",
             [st](request_context& ctx) { return answer(ctx, st, wire_format::openai); });
  routes.add(http_method::post, "/chat/completions",
             [st](request_context& ctx) { return answer(ctx, st, wire_format::openai); });
  routes.add(http_method::post, "/v1/messages",
             [st](request_context& ctx) { return answer(ctx, st, wire_format::anthropic); });
  routes.add(http_method::get, "/v1/models", [st](request_context&) { return list_models(st); });
  routes.add(http_method::get, "/_mock/stats", [this](request_context&) { return report(this); });
  auto server_options = state_->options.server;
  server_options.server_name = "troupe-mock-llm";
  server_ = std::make_unique<net::http_server>(io, std::move(routes), server_options, *metrics_);
  state_->server = server_.get();
}

mock_llm_server::~mock_llm_server() = default;

expected<endpoint> mock_llm_server::listen(const endpoint& where) {
  return server_->listen(where);
}

void mock_llm_server::start() {
  server_->start();
}

void mock_llm_server::stop(std::chrono::milliseconds grace, std::function<void()> done) {
  server_->stop(grace, std::move(done));
}

mock_llm_stats mock_llm_server::stats() const {
  mock_llm_stats s;
  s.requests = state_->requests.load();
  s.completion_requests = state_->calls.load();
  s.openai_requests = state_->openai.load();
  s.anthropic_requests = state_->anthropic.load();
  s.faults_injected = state_->faults.load();
  s.streams_started = state_->started.load();
  s.streams_completed = state_->completed.load();
  s.streams_abandoned = state_->abandoned.load();
  s.chunks_sent = state_->chunks.load();
  s.active_streams = static_cast<std::size_t>(std::max<std::int64_t>(0, state_->active.load()));
  s.open_connections = server_->open_connections();
  return s;
}

std::string mock_llm_server::stats_json() const {
  const auto s = stats();
  json_writer w;
  w.begin_object();
  w.key("mock").value(true);
  w.key("requests").value(s.requests);
  w.key("completion_requests").value(s.completion_requests);
  w.key("openai_requests").value(s.openai_requests);
  w.key("anthropic_requests").value(s.anthropic_requests);
  w.key("faults_injected").value(s.faults_injected);
  w.key("streams_started").value(s.streams_started);
  w.key("streams_completed").value(s.streams_completed);
  w.key("streams_abandoned").value(s.streams_abandoned);
  w.key("chunks_sent").value(s.chunks_sent);
  w.key("active_streams").value(s.active_streams);
  w.key("open_connections").value(s.open_connections);
  w.end_object();
  return std::move(w).str();
}

} // namespace troupe::mock
