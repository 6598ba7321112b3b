// The MCP client against local fakes of both transports: Streamable HTTP
// (support/fake_mcp_server.hpp, on net's HTTP server) and stdio (a Python server speaking
// line-delimited JSON-RPC, tests/data/mcp/fake_stdio_server.py).

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include "support/fake_mcp_server.hpp"
#include "support/wait_until.hpp"
#include "troupe/net/http_client.hpp"
#include "troupe/net/mcp/client.hpp"
#include "troupe/net/mcp/http_transport.hpp"
#include "troupe/net/mcp/stdio_transport.hpp"

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

using namespace troupe;
using namespace std::chrono_literals;
namespace mcp = troupe::net::mcp;
namespace asio = boost::asio;

namespace {

const std::filesystem::path fake_stdio_script =
    std::filesystem::path(TROUPE_TEST_DATA_DIR) / "mcp" / "fake_stdio_server.py";

/// An io thread for the client and its transport, and a way to wait for a coroutine on
/// it from the test thread.
class client_fixture {
public:
  client_fixture() : work_(io_.get_executor()), thread_([this] { io_.run(); }) {
    http_ = std::make_unique<net::http_client>(io_.get_executor());
  }
  ~client_fixture() {
    if (client_) {
      run(client_->close());
    }
    asio::post(io_, [this] { http_.reset(); });
    client_.reset();
    work_.reset();
    thread_.join();
  }

  template <class T> T run(asio::awaitable<T> task) {
    return asio::co_spawn(io_, std::move(task), asio::use_future).get();
  }
  void run(asio::awaitable<void> task) {
    asio::co_spawn(io_, std::move(task), asio::use_future).get();
  }

  std::shared_ptr<mcp::client> over_http(const std::string& url, mcp::client_options options = {}) {
    options.name = options.name.empty() ? "fake" : options.name;
    mcp::http_options http;
    http.name = options.name;
    http.url = url;
    http.headers = {{"Authorization", "Bearer secret-token"}};
    client_ = mcp::client::make(io_.get_executor(), mcp::make_http_transport(*http_, http),
                                std::move(options));
    return client_;
  }

  std::shared_ptr<mcp::client> over_stdio(std::map<std::string, std::string> env,
                                          mcp::client_options options = {}) {
    options.name = options.name.empty() ? "fake" : options.name;
    mcp::stdio_options stdio;
    stdio.name = options.name;
    stdio.argv = {"/usr/bin/python3", fake_stdio_script.string()};
    stdio.env = std::move(env);
    client_ =
        mcp::client::make(io_.get_executor(), mcp::make_stdio_transport(io_.get_executor(), stdio),
                          std::move(options));
    return client_;
  }

  asio::io_context& io() {
    return io_;
  }

private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::unique_ptr<net::http_client> http_;
  std::shared_ptr<mcp::client> client_;
};

/// A temporary file the stdio fake logs every message it receives to.
struct message_log {
  message_log()
      : path(std::filesystem::temp_directory_path() /
             ("troupe-mcp-fake-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
              ".jsonl")) {
    std::filesystem::remove(path);
  }
  ~message_log() {
    std::filesystem::remove(path);
  }
  std::string text() const {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::path path;
  static inline std::atomic<int> counter{0};
};

std::vector<std::string> names_of(const std::vector<mcp::tool_info>& tools) {
  std::vector<std::string> out;
  for (const auto& t : tools) {
    out.push_back(t.name);
  }
  return out;
}

} // namespace

TEST_CASE("mcp client over HTTP keeps the session id and sends the agreed version after "
          "initialize",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  auto server = f.run(client->connect());
  REQUIRE(server);
  CHECK(server->protocol_version == "2025-11-25");
  CHECK(server->name == "fake-http");
  auto tools = f.run(client->list_tools());
  REQUIRE(tools);
  // Five tools in pages of two: three tools/list requests, every tool once, in order.
  CHECK(names_of(*tools) ==
        std::vector<std::string>{"echo", "progress", "cut", "cut_no_id", "hang"});
  CHECK(fake.requests_of("tools/list").size() == 3);
  auto echoed = f.run(client->call_tool("echo", R"({"message":"hi"})", 5s));
  REQUIRE(echoed);
  CHECK(echoed->text == "Echo: hi");

  const auto all = fake.requests();
  REQUIRE(all.size() >= 5);
  CHECK(all[0].rpc_method == "initialize");
  CHECK(all[0].header("Mcp-Session-Id").empty());
  CHECK(all[0].header("MCP-Protocol-Version").empty());
  CHECK(all[1].rpc_method == "notifications/initialized");
  for (const auto& r : all) {
    CHECK(r.header("Authorization") == "Bearer secret-token");
    CHECK(r.header("Accept") == "application/json, text/event-stream");
    if (r.rpc_method != "initialize") {
      CHECK(r.header("Mcp-Session-Id") == "session-1");
      CHECK(r.header("MCP-Protocol-Version") == "2025-11-25");
    }
  }
}

TEST_CASE("mcp client ignores a body a server sends for a notification", "[net][mcp]") {
  test::fake_mcp_server fake;
  fake.answer_notifications_with_body();
  client_fixture f;
  auto client = f.over_http(fake.url());
  auto server = f.run(client->connect());
  INFO((server ? "" : server.error().message));
  REQUIRE(server);
  CHECK(fake.requests_of("notifications/initialized").size() == 1);
  auto echoed = f.run(client->call_tool("echo", R"({"message":"still here"})", 5s));
  REQUIRE(echoed);
  CHECK(echoed->text == "Echo: still here");
}

TEST_CASE("mcp client that answers elicitation opens the server's own stream once, and a "
          "405 ends it",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  mcp::client_options options;
  options.elicitation = mcp::elicitation_policy::accept_defaults;
  auto client = f.over_http(fake.url(), std::move(options));
  REQUIRE(f.run(client->connect()));
  // Elicitation requests a server makes outside a call's answer come on that stream.
  REQUIRE(fake.wait_for("GET", 1, 5s));
  const auto get = fake.requests_of("GET").front();
  CHECK(get.header("Accept") == "text/event-stream");
  CHECK(get.header("Mcp-Session-Id") == "session-1");
  CHECK(get.header("Last-Event-ID").empty());
  // The fake answers 405 (no stream of its own): the client does not ask again.
  REQUIRE(f.run(client->ping()));
  CHECK(fake.requests_of("GET").size() == 1);
}

TEST_CASE("mcp client accepts a server's downgrade to 2025-03-26 and then speaks it",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  fake.set_answer_version("2025-03-26");
  client_fixture f;
  auto client = f.over_http(fake.url());
  auto server = f.run(client->connect());
  REQUIRE(server);
  CHECK(server->protocol_version == "2025-03-26");
  REQUIRE(f.run(client->ping()));
  CHECK(fake.requests_of("ping").front().header("MCP-Protocol-Version") == "2025-03-26");
}

TEST_CASE("mcp client refuses a server that answers with a version troupe does not speak",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  fake.set_answer_version("2024-11-05");
  client_fixture f;
  auto client = f.over_http(fake.url());
  auto server = f.run(client->connect());
  REQUIRE_FALSE(server);
  CHECK_THAT(server.error().message, Catch::Contains("2024-11-05"));
  CHECK_FALSE(client->is_open());
}

TEST_CASE("mcp client reads an answer streamed as SSE with its progress notifications",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  std::vector<double> progress;
  auto result =
      f.run(client->call_tool("progress", "{}", 5s, {}, [&progress](const mcp::progress_update& u) {
        progress.push_back(u.progress);
      }));
  REQUIRE(result);
  CHECK(result->text == "progressed");
  CHECK(progress == std::vector<double>{1, 2, 3});
}

TEST_CASE("mcp client resumes a cut answer stream with Last-Event-ID after the server's retry",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  fake.set_cut_retry(300ms);
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  auto result = f.run(client->call_tool("cut", "{}", 10s));
  REQUIRE(result);
  CHECK(result->text == "resumed answer");
  const auto gets = fake.requests_of("GET");
  REQUIRE(gets.size() == 1);
  CHECK(gets[0].header("Last-Event-ID") == "cut-1");
  CHECK(gets[0].header("Mcp-Session-Id") == "session-1");
  CHECK(gets[0].header("MCP-Protocol-Version") == "2025-11-25");
  // Not before the retry the server asked for (a little slack for the clocks' reads).
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(gets[0].at - fake.cut_closed_at());
  CHECK(waited >= 290ms);
  CHECK(waited < 2000ms);
}

TEST_CASE("mcp client fails a request whose stream ends without an answer or an event id",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  auto result = f.run(client->call_tool("cut_no_id", "{}", 10s));
  REQUIRE_FALSE(result);
  CHECK(result.error().code == errc::unavailable);
  CHECK_THAT(result.error().message, Catch::Contains("cannot be resumed"));
  CHECK(fake.requests_of("GET").empty());
}

TEST_CASE("mcp client starts a new session when the server answers 404 and sends the request "
          "again",
          "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  int changed = 0;
  mcp::client_options options;
  options.on_tools_changed = [&changed] { ++changed; };
  auto client = f.over_http(fake.url(), options);
  REQUIRE(f.run(client->connect()));
  fake.forget_sessions();
  auto result = f.run(client->call_tool("echo", R"({"message":"again"})", 5s));
  REQUIRE(result);
  CHECK(result->text == "Echo: again");
  const auto inits = fake.requests_of("initialize");
  REQUIRE(inits.size() == 2);
  CHECK(inits[1].header("Mcp-Session-Id").empty());
  const auto calls = fake.requests_of("tools/call");
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].header("Mcp-Session-Id") == "session-1");
  CHECK(calls[1].header("Mcp-Session-Id") == "session-2");
  // The new session may offer other tools: whoever lists them is told.
  CHECK(changed == 1);
}

TEST_CASE("mcp client ends its HTTP session with DELETE when it closes", "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  f.run(client->close());
  const auto deletes = fake.requests_of("DELETE");
  REQUIRE(deletes.size() == 1);
  CHECK(deletes[0].header("Mcp-Session-Id") == "session-1");
  auto after = f.run(client->ping());
  REQUIRE_FALSE(after);
  CHECK(after.error().code == errc::unavailable);
}

TEST_CASE("mcp client gives up at the deadline and tells the server it cancelled", "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  const auto started = std::chrono::steady_clock::now();
  auto result = f.run(client->call_tool("hang", "{}", 300ms));
  REQUIRE_FALSE(result);
  INFO(result.error().message);
  CHECK(result.error().code == errc::timeout);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  REQUIRE(fake.wait_for("notifications/cancelled", 1, 5s));
  const auto call = fake.requests_of("tools/call").front();
  const auto cancel = fake.requests_of("notifications/cancelled").front();
  CHECK_THAT(cancel.body, Catch::Contains(R"("requestId":)"));
  // The id of the call it cancels.
  const auto id_at = call.body.find(R"("id":)");
  REQUIRE(id_at != std::string::npos);
  const auto id = call.body.substr(id_at + 5, call.body.find(',', id_at) - id_at - 5);
  CHECK_THAT(cancel.body, Catch::Contains(std::string(R"("requestId":)") + id));
}

TEST_CASE("mcp client cancels a call at the server when its caller is cancelled", "[net][mcp]") {
  test::fake_mcp_server fake;
  client_fixture f;
  auto client = f.over_http(fake.url());
  REQUIRE(f.run(client->connect()));
  asio::cancellation_signal signal;
  auto pending = asio::co_spawn(f.io(), client->call_tool("hang", "{}", 60s),
                                asio::bind_cancellation_slot(signal.slot(), asio::use_future));
  REQUIRE(fake.wait_for("tools/call", 1, 5s));
  asio::post(f.io(), [&signal] { signal.emit(asio::cancellation_type::terminal); });
  auto result = pending.get();
  REQUIRE_FALSE(result);
  INFO(result.error().message);
  CHECK(result.error().code == errc::cancelled);
  CHECK(fake.wait_for("notifications/cancelled", 1, 5s));
}

TEST_CASE("mcp client over stdio lists tools across pages and tells a tool failure from an "
          "error",
          "[net][mcp]") {
  message_log log;
  client_fixture f;
  auto client = f.over_stdio({{"FAKE_MCP_LOG", log.path.string()}});
  auto server = f.run(client->connect());
  REQUIRE(server);
  CHECK(server->name == "fake-stdio");
  CHECK(server->tools_list_changed);
  auto tools = f.run(client->list_tools());
  REQUIRE(tools);
  CHECK(names_of(*tools) ==
        std::vector<std::string>{"echo", "fail", "slow", "die", "elicit", "grow"});
  CHECK((*tools)[0].read_only);
  auto echoed = f.run(client->call_tool("echo", R"({"message":"über"})", 5s));
  REQUIRE(echoed);
  CHECK(echoed->text == "Echo: über");
  auto failed = f.run(client->call_tool("fail", "{}", 5s));
  REQUIRE(failed);
  CHECK(failed->is_error);
  CHECK(failed->text == "it failed on purpose");
  auto unknown = f.run(client->call_tool("nope", "{}", 5s));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == errc::invalid_argument);
  CHECK_THAT(unknown.error().message, Catch::Contains("Unknown tool: nope"));
  // The handshake went as the spec says: initialize, then notifications/initialized.
  const auto sent = log.text();
  CHECK(sent.find(R"("method": "initialize")") < sent.find("notifications/initialized"));
}

TEST_CASE("mcp client over stdio keeps a call alive while progress arrives, up to its hard "
          "limit",
          "[net][mcp]") {
  client_fixture f;
  auto client = f.over_stdio({});
  REQUIRE(f.run(client->connect()));
  std::vector<std::string> messages;
  // Four steps of 150 ms: 600 ms in all, with a 400 ms timeout that progress resets.
  auto done = f.run(client->call_tool(
      "slow", R"({"steps":4,"delay_ms":150})", 400ms, 5s,
      [&messages](const mcp::progress_update& u) { messages.push_back(u.message); }));
  REQUIRE(done);
  CHECK(done->text == "done after 4 steps");
  CHECK(messages == std::vector<std::string>{"step 1", "step 2", "step 3", "step 4"});
  // The hard limit holds whatever the progress.
  auto capped = f.run(client->call_tool("slow", R"({"steps":10,"delay_ms":150})", 400ms, 700ms));
  REQUIRE_FALSE(capped);
  CHECK(capped.error().code == errc::timeout);
}

TEST_CASE("mcp client over stdio sends notifications/cancelled for a cancelled call",
          "[net][mcp]") {
  message_log log;
  client_fixture f;
  auto client = f.over_stdio({{"FAKE_MCP_LOG", log.path.string()}});
  REQUIRE(f.run(client->connect()));
  asio::cancellation_signal signal;
  auto pending =
      asio::co_spawn(f.io(), client->call_tool("slow", R"({"steps":100,"delay_ms":100})", 60s),
                     asio::bind_cancellation_slot(signal.slot(), asio::use_future));
  REQUIRE(
      test::wait_until([&] { return log.text().find("tools/call") != std::string::npos; }, 10s));
  asio::post(f.io(), [&signal] { signal.emit(asio::cancellation_type::terminal); });
  auto result = pending.get();
  REQUIRE_FALSE(result);
  CHECK(result.error().code == errc::cancelled);
  REQUIRE(test::wait_until(
      [&] { return log.text().find("notifications/cancelled") != std::string::npos; }, 10s));
  // The session goes on.
  REQUIRE(f.run(client->ping()));
}

TEST_CASE("mcp client over stdio fails the call in flight when the server dies, saying how",
          "[net][mcp]") {
  client_fixture f;
  std::promise<error> closed;
  mcp::client_options options;
  options.on_closed = [&closed](const error& e) { closed.set_value(e); };
  auto client = f.over_stdio({}, options);
  REQUIRE(f.run(client->connect()));
  auto result = f.run(client->call_tool("die", "{}", 10s));
  REQUIRE_FALSE(result);
  CHECK(result.error().code == errc::unavailable);
  CHECK_THAT(result.error().message, Catch::Contains("exited with code 3"));
  CHECK_THAT(result.error().message, Catch::Contains("dying on purpose"));
  auto reported = closed.get_future();
  REQUIRE(reported.wait_for(5s) == std::future_status::ready);
  CHECK(reported.get().code == errc::unavailable);
  CHECK_FALSE(client->is_open());
  auto after = f.run(client->ping());
  REQUIRE_FALSE(after);
  CHECK(after.error().code == errc::unavailable);
}

TEST_CASE("mcp client answers elicitation with the schema's defaults, or declines by policy",
          "[net][mcp]") {
  {
    client_fixture f;
    mcp::client_options options;
    options.elicitation = mcp::elicitation_policy::accept_defaults;
    auto client = f.over_stdio({}, options);
    REQUIRE(f.run(client->connect()));
    auto result = f.run(client->call_tool("elicit", "{}", 10s));
    REQUIRE(result);
    CHECK(result->text ==
          R"(elicited {"action": "accept", "content": {"age": 36, "name": "Ada"}})");
  }
  {
    message_log log;
    client_fixture f;
    auto client = f.over_stdio({{"FAKE_MCP_LOG", log.path.string()}});
    REQUIRE(f.run(client->connect()));
    auto result = f.run(client->call_tool("elicit", "{}", 10s));
    REQUIRE(result);
    CHECK(result->text == R"(elicited {"action": "decline"})");
    // Declining by policy, it does not claim the capability either.
    const auto sent = log.text();
    const auto first_line = sent.substr(0, sent.find('\n'));
    CHECK_THAT(first_line, Catch::Contains(R"("method": "initialize")"));
    CHECK_THAT(first_line, Catch::Contains(R"("capabilities": {})"));
  }
}

TEST_CASE("mcp client reports tools/list_changed and lists the new tools", "[net][mcp]") {
  client_fixture f;
  std::atomic<int> changed{0};
  mcp::client_options options;
  options.on_tools_changed = [&changed] { ++changed; };
  auto client = f.over_stdio({}, options);
  REQUIRE(f.run(client->connect()));
  REQUIRE(f.run(client->call_tool("grow", "{}", 5s)));
  REQUIRE(test::wait_until([&] { return changed.load() == 1; }, 5s));
  auto tools = f.run(client->list_tools());
  REQUIRE(tools);
  CHECK(names_of(*tools).back() == "extra");
}

TEST_CASE("mcp client says why a stdio server cannot start or speaks an unknown version",
          "[net][mcp]") {
  {
    client_fixture f;
    mcp::stdio_options stdio;
    stdio.name = "missing";
    stdio.argv = {"/nonexistent/mcp-server"};
    mcp::client_options options;
    options.name = "missing";
    auto client = mcp::client::make(
        f.io().get_executor(), mcp::make_stdio_transport(f.io().get_executor(), stdio), options);
    auto result = f.run(client->connect());
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains("cannot start MCP server 'missing'"));
  }
  {
    client_fixture f;
    auto client = f.over_stdio({{"FAKE_MCP_VERSION", "2024-11-05"}});
    auto result = f.run(client->connect());
    REQUIRE_FALSE(result);
    CHECK_THAT(result.error().message, Catch::Contains("2024-11-05"));
  }
}
