// The node on the shard scheduler (actors.scheduler_policy = shards): its loop-lag
// series, connections accepted on every shard, and a conversation's runs on its shard.

#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "actors/run_fixture.hpp"
#include "storage/storage_fixture.hpp"
#include "support/wait_until.hpp"
#include "troupe/actors/conversation.hpp"
#include "troupe/actors/node.hpp"
#include "troupe/actors/shard_scheduler.hpp"

using namespace troupe;
using namespace troupe::test;
using troupe::storage::testing::must;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

settings two_shards(const storage::testing::temp_dir& dir) {
  settings config;
  config.data_dir = dir.path();
  config.listen = must(parse_endpoint("127.0.0.1:0"));
  config.actors.scheduler_policy = "shards";
  config.actors.shards = 2;
  return config;
}

/// The value of the sample `name{labels}` in Prometheus text, or nothing.
std::optional<double> sample(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  return std::stod(text.substr(at + series.size() + 2));
}

/// Series of metric family `name` (lines `name{...} value`).
std::size_t series_count(const std::string& text, const std::string& name) {
  const std::regex line("\n" + name + "\\{[^}]*\\} ");
  return static_cast<std::size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), line), std::sregex_iterator()));
}

/// One request on a connection of its own; the whole response.
std::string exchange(std::uint16_t port, const std::string& target) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(socket,
              asio::buffer("GET " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  std::string response;
  boost::system::error_code ec;
  asio::read(socket, asio::dynamic_buffer(response), ec);
  return response;
}

/// Runs `f` on shard `k`'s thread and waits for it.
template <class F> void on_shard(actors::shard_set& shards, std::size_t k, F f) {
  std::promise<void> done;
  asio::post(shards.executor(k), [&] {
    f();
    done.set_value();
  });
  done.get_future().wait();
}

/// A tool that records the shard its call runs on.
class where_am_i final : public tools::tool {
public:
  explicit where_am_i(std::shared_ptr<std::atomic<int>> seen) : seen_(std::move(seen)) {
    descriptor_.name = "where_am_i";
    descriptor_.description = "says which shard runs it";
  }
  const tools::tool_descriptor& descriptor() const noexcept override {
    return descriptor_;
  }
  asio::awaitable<tools::tool_result> invoke(std::string, tools::tool_context) const override {
    const auto here = actors::shard_set::current();
    seen_->store(here ? static_cast<int>(*here) : -1);
    co_return tools::tool_result{true, R"({"ok":true})", {}, {}};
  }

private:
  tools::tool_descriptor descriptor_;
  std::shared_ptr<std::atomic<int>> seen_;
};

} // namespace

TEST_CASE("a node on two shards exports one loop-lag series per shard", "[actors][node][shards]") {
  storage::testing::temp_dir dir;
  actors::node node(two_shards(dir));
  must(node.start().map([](const endpoint&) {}));
  REQUIRE(actors::shards_of(node.system()) != nullptr);
  CHECK(actors::shards_of(node.system())->size() == 2);
  // The probe fires every 100 ms on each shard: wait until both reported.
  std::string text;
  CHECK(wait_until(
      [&] {
        text = node.metrics().render();
        return sample(text, R"(troupe_shard_loop_lag_seconds_count{shard="0"})").value_or(0) > 0 &&
               sample(text, R"(troupe_shard_loop_lag_seconds_count{shard="1"})").value_or(0) > 0;
      },
      10s));
  CHECK_THAT(text, Catch::Contains("# TYPE troupe_shard_loop_lag_seconds histogram"));
  CHECK(sample(text, R"(troupe_shard_loop_lag_seconds_count{shard="0"})").value_or(0) > 0);
  CHECK(sample(text, R"(troupe_shard_loop_lag_seconds_count{shard="1"})").value_or(0) > 0);
  CHECK(series_count(text, "troupe_shard_loop_lag_seconds_count") == 2);
  node.stop();
  node.wait();
}

TEST_CASE("a node on two shards accepts connections on both shards", "[actors][node][shards]") {
  storage::testing::temp_dir dir;
  actors::node node(two_shards(dir));
  const auto bound = must(node.start());
  // SO_REUSEPORT spreads connections by a hash of their addresses: with 32 connections
  // from 32 source ports, all landing on one shard has a chance of 2^-31.
  for (int i = 0; i < 32; ++i) {
    const auto response = exchange(bound.port, "/no-such-route");
    REQUIRE_THAT(response, Catch::StartsWith("HTTP/1.1 404"));
  }
  const auto text = node.metrics().render();
  const auto first = sample(text, R"(troupe_http_connections_total{shard="0"})");
  const auto second = sample(text, R"(troupe_http_connections_total{shard="1"})");
  REQUIRE(first);
  REQUIRE(second);
  CHECK(*first > 0);
  CHECK(*second > 0);
  CHECK(*first + *second == 32);
  node.stop();
  node.wait();
}

TEST_CASE("a conversation on the shard scheduler runs its runs and tool calls on its shard",
          "[actors][conversation][shards]") {
  run_world w(R"([
    {"match":{"call":1},"reply":{"tool_calls":[{"name":"where_am_i","arguments":{}}]}},
    {"match":{"call":2},"reply":{"text":"found it"}}])");
  caf::actor_system_config config;
  actors::shard_options options;
  options.shards = 2;
  actors::use_shard_scheduler(config, options);
  caf::actor_system system(config);
  auto* shards = actors::shards_of(system);
  REQUIRE(shards != nullptr);
  // A conversation id whose shard is 1: the fallback client and the spawning thread's
  // default (round-robin from shard 0) would both be wrong.
  std::string id;
  for (int i = 0; id.empty(); ++i) {
    const auto candidate = "c-" + std::to_string(i);
    if (shards->shard_for(candidate) == 1) {
      id = candidate;
    }
  }
  std::vector<std::unique_ptr<net::http_client>> clients;
  auto per_shard = std::make_shared<std::vector<net::http_client*>>();
  for (std::size_t k = 0; k < shards->size(); ++k) {
    clients.push_back(std::make_unique<net::http_client>(shards->executor(k)));
    per_shard->push_back(clients.back().get());
  }
  auto seen = std::make_shared<std::atomic<int>>(-2);
  auto registry = std::make_shared<tools::tool_registry>();
  REQUIRE(registry->add(std::make_shared<where_am_i>(seen)));

  auto run = w.spec("", {"where_am_i"});
  actors::conversation_spec c;
  c.id = id;
  c.agent = run.agent;
  c.provider = run.provider;
  c.workspace = run.workspace;
  c.io = run.io;
  c.io.tools = registry;
  c.io.http = clients.front().get();
  c.io.shard_http = per_shard;
  {
    auto conversation = actors::spawn_conversation(system, std::move(c));
    CHECK(actors::home_shard_of(conversation) == std::optional<std::size_t>(1));
    caf::scoped_actor self{system};
    std::optional<actors::run_result> result;
    self->request(conversation, caf::timespan(60s), actors::send_atom::value, std::string("where"))
        .receive([&](actors::run_result& r) { result = std::move(r); },
                 [&](caf::error& e) { FAIL("no answer: " << caf::to_string(e)); });
    REQUIRE(result);
    CHECK_THAT(result->text, Catch::Contains("found it"));
    CHECK(seen->load() == 1);
    self->send_exit(conversation, caf::exit_reason::user_shutdown);
  }
  system.await_all_actors_done();
  // The clients live on their shards: destroy them there, while the shards run.
  for (std::size_t k = 0; k < clients.size(); ++k) {
    on_shard(*shards, k, [&clients, k] { clients[k].reset(); });
  }
}
