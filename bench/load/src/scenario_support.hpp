#pragma once

// Private to bench/load: what the scenario files share — the in-process mock-llm, request
// templates and their sending, and the report helpers.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <boost/json/object.hpp>

#include "troupe/bench/load_generator.hpp"
#include "troupe/bench/report.hpp"
#include "troupe/bench/scenarios.hpp"
#include "troupe/bench/troupe_server.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/net/http_client.hpp"

namespace troupe::bench::detail {

using clock_type = std::chrono::steady_clock;

/// The agent without tools that the via path through troupe talks to.
inline constexpr std::string_view chat_agent_name = "bench-chat";
/// The agent with the `read` tool that runs the peers' task.
inline constexpr std::string_view tool_agent_name = "bench-agent";

/// A mock-llm on its own io thread, for runs without --target.
class local_mock {
public:
  explicit local_mock(mock::mock_llm_options options = {});
  ~local_mock();
  local_mock(const local_mock&) = delete;
  local_mock& operator=(const local_mock&) = delete;

  /// Binds 127.0.0.1:0 and starts serving; returns http://127.0.0.1:PORT.
  expected<std::string> start();
  /// Thread-safe counters.
  mock::mock_llm_stats stats() const;

private:
  boost::asio::io_context io_{1};
  std::unique_ptr<mock::mock_llm_server> server_;
  std::thread thread_;
};

/// A prepared request a workload sends again and again.
struct request_template {
  std::string url;
  std::string body;
  std::vector<net::http_header> headers;
  net::http_method method = net::http_method::post;
};

net::http_client_request make_request(const request_template& t, std::chrono::milliseconds timeout);

/// One request; nullopt on a 2xx answer, else the error kind ("timeout", "http_500", …).
/// `body` (may be null) receives the answer's body.
boost::asio::awaitable<std::optional<std::string>> send_request(net::http_client& client,
                                                                const request_template* t,
                                                                std::chrono::milliseconds timeout,
                                                                std::string* body);

/// Unmeasured load before a measured run: a tenth of it, at most half a second.
std::chrono::milliseconds default_warmup(std::chrono::milliseconds duration);

/// Adds "errors" and "errors.<kind>".
void add_errors(bench_report& report, const load_result& r);

/// Microseconds of a nanosecond count.
double us(std::uint64_t ns);

/// The troupe a scenario runs against: started here, or given by --troupe.
expected<std::unique_ptr<troupe_server>> open_troupe(const scenario_options& o,
                                                     const troupe_setup& setup);

/// `s` as a JSON string literal.
std::string json_text(std::string_view s);
/// A request to `path` on troupe, with its admin token and a JSON body to fill in.
request_template troupe_post(const troupe_server& troupe, std::string path);
/// The object `text` holds, or nullopt.
std::optional<boost::json::object> parse_object(std::string_view text);
/// `o[key]` when it is a string, else empty.
std::string string_field(const boost::json::object& o, std::string_view key);

// -- the chat-API scenarios (chat_scenarios.cpp) --

expected<void> run_agent(const scenario_options& o, bench_report& report);
expected<void> run_storage(const scenario_options& o, bench_report& report);
expected<void> run_idle(const scenario_options& o, bench_report& report);

// -- the channel scenario (channel_scenario.cpp) --
expected<void> run_channel(const scenario_options& o, bench_report& report);
/// channel with --channel-type telegram and --users or --peers: N simulated users through
/// the Bot API fake in polling mode, troupe and OpenClaw (telegram_users.cpp).
expected<void> run_telegram_users(const scenario_options& o, bench_report& report);

} // namespace troupe::bench::detail
