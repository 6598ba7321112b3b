#include "troupe/net/provider_client.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "troupe/net/sse_parser.hpp"

// g++ 12 at -O2 reports -Wmismatched-new-delete for Asio coroutine frames it inlines: a
// known false positive (awaitable_frame_base pairs its own operator new and delete).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace troupe::net {

provider_error provider_error_from(const error& e) {
  provider_error out;
  out.message = e.message;
  switch (e.code) {
    case errc::timeout:
      out.kind = provider_failure::timeout;
      break;
    case errc::cancelled:
      out.kind = provider_failure::cancelled;
      break;
    case errc::limit_exceeded:
    case errc::parse_error:
      out.kind = provider_failure::malformed_response;
      break;
    case errc::invalid_argument:
      out.kind = provider_failure::bad_request;
      break;
    default:
      out.kind = provider_failure::connection_lost;
      break;
  }
  return out;
}

provider_client::provider_client(http_client& http, provider_config config)
    : http_(http), config_(std::move(config)) {
  if (config_.base_url.empty()) {
    config_.base_url = std::string(default_base_url(config_.type));
  }
  while (!config_.base_url.empty() && config_.base_url.back() == '/') {
    config_.base_url.pop_back();
  }
}

std::vector<http_header> provider_client::headers(bool stream) const {
  std::vector<http_header> h;
  h.push_back({"Content-Type", "application/json"});
  h.push_back({"Accept", stream ? "text/event-stream" : "application/json"});
  if (wire_of(config_.type) == wire_format::anthropic) {
    if (!config_.api_key.empty()) {
      h.push_back({"x-api-key", config_.api_key});
    }
    h.push_back({"anthropic-version", config_.anthropic_version});
  } else if (!config_.api_key.empty()) {
    h.push_back({"Authorization", "Bearer " + config_.api_key});
  }
  for (const auto& extra : config_.extra_headers) {
    h.push_back(extra);
  }
  return h;
}

std::optional<std::chrono::milliseconds>
provider_client::backoff(unsigned retry, const provider_error& failure) const {
  if (!is_retryable(failure.kind) || retry >= config_.retry.max_attempts) {
    return std::nullopt;
  }
  const auto& p = config_.retry;
  const double base = static_cast<double>(p.initial_backoff.count()) *
                      std::pow(2.0, static_cast<double>(retry - 1));
  const double capped = std::min(base, static_cast<double>(p.max_backoff.count()));
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> spread(1.0 - p.jitter, 1.0 + p.jitter);
  auto delay = std::chrono::milliseconds(static_cast<std::int64_t>(capped * spread(rng)));
  if (failure.retry_after) {
    if (*failure.retry_after > p.max_retry_after) {
      return std::nullopt;
    }
    delay = std::max(delay, *failure.retry_after);
  }
  return delay;
}

asio::awaitable<provider_client::attempt_result>
provider_client::attempt(std::string url, std::shared_ptr<const std::string> body,
                         completion_builder& builder, const stream_event_sink& on_event,
                         bool stream) {
  attempt_result result;
  http_client_request req;
  req.method = http_method::post;
  req.url = std::move(url);
  req.headers = headers(stream);
  req.shared_body = std::move(body);
  req.deadlines = config_.deadlines;
  auto opened = co_await http_.open(std::move(req));
  if (!opened) {
    result.failure = provider_error_from(opened.error());
    co_return result;
  }
  auto& response = *opened;
  const auto wire = wire_of(config_.type);
  if (response.status() != 200) {
    std::string error_body;
    for (;;) {
      auto more = co_await response.read(error_body);
      if (!more || !*more || error_body.size() > 64 * 1024) {
        break;
      }
    }
    result.failure =
        classify_http_error(response.status(), error_body, response.header("retry-after"));
    co_return result;
  }

  std::vector<stream_event> events;
  const auto deliver = [&] {
    for (const auto& e : events) {
      builder.apply(e);
      if (on_event) {
        on_event(e);
      }
    }
    events.clear();
  };

  if (!stream) {
    std::string whole;
    for (;;) {
      auto more = co_await response.read(whole);
      if (!more) {
        result.failure = provider_error_from(more.error());
        result.answer_started = response.bytes_received() > 0;
        co_return result;
      }
      if (!*more) {
        break;
      }
    }
    result.answer_started = true;
    auto decoded = wire == wire_format::openai ? decode_openai_completion(whole, events)
                                               : decode_anthropic_message(whole, events);
    deliver();
    if (!decoded) {
      result.failure = decoded.error();
    }
    co_return result;
  }

  sse_parser parser;
  openai_stream_decoder openai;
  anthropic_stream_decoder anthropic;
  std::optional<provider_error> decode_failure;
  std::string chunk;
  for (;;) {
    chunk.clear();
    auto more = co_await response.read(chunk);
    result.answer_started = response.bytes_received() > 0;
    if (!more) {
      result.failure = provider_error_from(more.error());
      if (result.failure->kind != provider_failure::cancelled && result.answer_started) {
        result.failure->message = "the stream broke after " +
                                  std::to_string(response.bytes_received()) +
                                  " bytes: " + result.failure->message;
      }
      co_return result;
    }
    if (!*more) {
      break;
    }
    auto parsed = parser.feed(chunk, [&](const sse_message& m) -> bool {
      auto r = wire == wire_format::openai ? openai.decode(m.data, events)
                                           : anthropic.decode(m.event, m.data, events);
      deliver();
      if (!r) {
        decode_failure = r.error();
        return false;
      }
      return true;
    });
    if (decode_failure) {
      result.failure = std::move(decode_failure);
      co_return result; // dropping `response` ends the transfer
    }
    if (!parsed) {
      result.failure = provider_error{provider_failure::malformed_response, parsed.error().message,
                                      200, std::nullopt};
      co_return result;
    }
  }
  const bool done = wire == wire_format::openai ? openai.done() : anthropic.done();
  const bool finished = wire == wire_format::openai ? openai.finished() : anthropic.finished();
  if (!done && !finished) {
    result.failure = provider_error{provider_failure::connection_lost,
                                    wire == wire_format::openai
                                        ? "the stream ended without a finish_reason or [DONE]"
                                        : "the stream ended without a stop_reason or message_stop",
                                    200, std::nullopt};
  }
  // A finish reason without the end marker: the answer is complete, only the end marker
  // (and perhaps the usage that follows it) is missing. Accept it.
  co_return result;
}

asio::awaitable<completion_outcome> provider_client::complete(completion_request request,
                                                              stream_event_sink on_event) {
  completion_outcome outcome;
  const auto wire = wire_of(config_.type);
  auto body = wire == wire_format::openai
                  ? build_openai_request(request)
                  : build_anthropic_request(request, config_.default_max_tokens);
  if (!body) {
    outcome.failure =
        provider_error{provider_failure::bad_request, body.error().message, 0, std::nullopt};
    co_return outcome;
  }
  if (config_.base_url.empty()) {
    outcome.failure = provider_error{provider_failure::bad_request,
                                     "no base URL configured for this provider", 0, std::nullopt};
    co_return outcome;
  }
  const std::string url =
      config_.base_url + (wire == wire_format::openai ? "/chat/completions" : "/messages");
  // The body is all the attempts need: the request (history, tools) leaves memory while
  // the call waits on the model, and the body is shared by the attempts, not copied.
  const bool stream = request.stream;
  request = {};
  const auto shared_body = std::make_shared<const std::string>(std::move(*body));
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (unsigned n = 1;; ++n) {
    completion_builder builder;
    outcome.attempts = n;
    auto attempting = attempt(url, shared_body, builder, on_event, stream);
    auto r = co_await std::move(attempting);
    if (!r.failure) {
      outcome.answer = std::move(builder).result();
      if (outcome.answer.finish) {
        if (auto kind = failure_for(*outcome.answer.finish)) {
          outcome.failure =
              provider_error{*kind,
                             *kind == provider_failure::truncated
                                 ? "the answer was cut by the token limit"
                                 : "the provider's content filter withheld the answer",
                             200, std::nullopt};
        }
      }
      co_return outcome;
    }
    std::optional<std::chrono::milliseconds> delay;
    if (!r.answer_started) {
      delay = backoff(n, *r.failure);
    }
    if (!delay) {
      outcome.answer = std::move(builder).result();
      outcome.failure = std::move(r.failure);
      co_return outcome;
    }
    timer.expires_after(*delay);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      outcome.failure = provider_error{provider_failure::cancelled,
                                       "cancelled while waiting to retry", 0, std::nullopt};
      co_return outcome;
    }
  }
}

asio::awaitable<tl::expected<std::vector<std::string>, provider_error>>
provider_client::list_models() {
  http_client_request req;
  req.method = http_method::get;
  req.url = config_.base_url + "/models";
  req.headers = headers(false);
  req.deadlines = config_.deadlines;
  auto response = co_await http_.fetch(std::move(req));
  if (!response) {
    co_return tl::unexpected(provider_error_from(response.error()));
  }
  if (response->status != 200) {
    co_return tl::unexpected(
        classify_http_error(response->status, response->body, response->header("retry-after")));
  }
  co_return parse_model_list(response->body);
}

} // namespace troupe::net
