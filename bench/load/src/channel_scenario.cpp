// The channel scenario: messages into a generic webhook channel, replies out at a local
// receiver standing in for the channel's callback_url. Every message is a separate
// platform delivery (`POST /api/v1/webhooks/channels/{name}`); its latency runs from the
// send of the delivery to the arrival of its reply at the receiver, so it covers the
// journal, the thread actor, the run on the (instant) mock model and the outbox.

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <regex>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "scenario_support.hpp"
#include "troupe/bench/process_stats.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::bench::detail {

namespace asio = boost::asio;

namespace {

constexpr std::string_view channel_name = "bench-hooks";
constexpr std::string_view channel_token = "troupe-bench-channel-token";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

/// The messages of a run: message `i` goes to thread `i % threads` as its `i / threads`-th
/// message, so a thread's messages are sent a whole round of threads apart, in order.
struct channel_load {
  std::size_t threads = 0;
  std::size_t total = 0;
  std::vector<std::atomic<std::int64_t>> sent_ns;
  std::vector<std::atomic<std::int64_t>> replied_ns;
  std::size_t next = 0; // the load generator's thread only
  request_template delivery;

  channel_load(std::size_t thread_count, std::size_t per_thread)
      : threads(thread_count), total(thread_count * per_thread), sent_ns(total), replied_ns(total) {
  }
};

/// The channel's callback_url: records the first reply to each message (its index is in
/// the reply's text: the mock repeats the message) and counts everything else.
class reply_receiver {
public:
  explicit reply_receiver(channel_load& load) : load_(load), server_(io_, routes(), {}, metrics_) {}
  ~reply_receiver() {
    std::promise<void> done;
    asio::post(io_, [this, &done] {
      server_.stop(std::chrono::milliseconds(0), [&done] { done.set_value(); });
    });
    done.get_future().wait();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  reply_receiver(const reply_receiver&) = delete;
  reply_receiver& operator=(const reply_receiver&) = delete;

  expected<std::string> start() {
    auto bound = server_.listen({"127.0.0.1", 0});
    if (!bound) {
      return tl::unexpected(bound.error());
    }
    server_.start();
    thread_ = std::thread([this] { io_.run(); });
    return fmt::format("http://127.0.0.1:{}/replies", bound->port);
  }

  /// Waits until every message has a reply or `limit` passes; true when all arrived.
  bool wait_for_all(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [this] { return answered_ == load_.total; });
  }

  std::size_t answered() const {
    std::lock_guard lock(mutex_);
    return answered_;
  }
  std::size_t duplicates() const {
    std::lock_guard lock(mutex_);
    return duplicates_;
  }
  std::size_t unrecognised() const {
    std::lock_guard lock(mutex_);
    return unrecognised_;
  }
  std::size_t out_of_order() const {
    std::lock_guard lock(mutex_);
    return out_of_order_;
  }

private:
  net::router routes() {
    net::router r;
    r.add(net::http_method::post, "/replies",
          [this](net::request_context& ctx) -> asio::awaitable<net::http_response> {
            take(ctx.request().body);
            co_return net::http_response::json(200, R"({"ok":true})");
          });
    return r;
  }

  void take(const std::string& body) {
    const auto at = now_ns();
    static const std::regex tag(R"(bench c([0-9]+))");
    const auto reply = parse_object(body);
    const auto text = reply ? string_field(*reply, "text") : std::string();
    std::smatch m;
    std::lock_guard lock(mutex_);
    if (!std::regex_search(text, m, tag) || std::stoull(m[1].str()) >= load_.total) {
      ++unrecognised_;
      return;
    }
    const auto i = static_cast<std::size_t>(std::stoull(m[1].str()));
    std::int64_t none = 0;
    if (!load_.replied_ns[i].compare_exchange_strong(none, at)) {
      ++duplicates_;
      return;
    }
    // The thread's previous message must have had its reply already.
    if (i >= load_.threads && load_.replied_ns[i - load_.threads].load() == 0) {
      ++out_of_order_;
    }
    if (++answered_ == load_.total) {
      changed_.notify_all();
    }
  }

  channel_load& load_;
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  metrics_registry metrics_;
  net::http_server server_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t answered_ = 0;
  std::size_t duplicates_ = 0;
  std::size_t unrecognised_ = 0;
  std::size_t out_of_order_ = 0;
};

asio::awaitable<std::optional<std::string>> deliver_next(net::http_client& client, channel_load* l,
                                                         std::chrono::milliseconds timeout) {
  if (l->next >= l->total) {
    co_return std::string("no_message_left");
  }
  const auto i = l->next++;
  request_template t = l->delivery;
  const auto id = fmt::format("bench c{}", i);
  t.body = fmt::format(R"({{"thread":"bench-t{}","sender":"bench-s{}","message_id":{},"text":{}}})",
                       i % l->threads, i % l->threads, json_text(id), json_text(id));
  l->sent_ns[i].store(now_ns());
  auto sending = send_request(client, &t, timeout, nullptr);
  co_return co_await std::move(sending);
}

expected<void> create_channel(const troupe_server& troupe, const std::string& callback_url) {
  auto t = troupe_post(troupe, "/api/v1/channels");
  t.body = fmt::format(R"({{"name":{},"type":"webhook","agent":{},"token":{},"callback_url":{},)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(channel_name), json_text(chat_agent_name),
                       json_text(channel_token), json_text(callback_url));
  auto created = fetch_blocking(make_request(t, std::chrono::milliseconds(10'000)));
  if (!created) {
    return tl::unexpected(created.error());
  }
  if (created->status != 201 && created->status != 200) {
    return fail(errc::unavailable, fmt::format("creating the channel answered {}: {}",
                                               created->status, created->body));
  }
  return {};
}

} // namespace

expected<void> run_channel(const scenario_options& o, bench_report& report) {
  const std::size_t threads = o.conversations ? o.conversations : 1'000;
  const std::size_t per_thread = o.runs ? o.runs : 5;
  mock::mock_llm_options mock_options;
  mock_options.tokens = o.tokens ? o.tokens : 8;
  local_mock mock(std::move(mock_options));
  auto mock_origin = mock.start();
  if (!mock_origin) {
    return tl::unexpected(mock_origin.error());
  }
  report.targets["mock"] = *mock_origin + "/v1";
  report.targets["mock_kind"] = "mock-llm in-process on 127.0.0.1:0, instant answers repeating "
                                "the message";

  channel_load load(threads, per_thread);
  reply_receiver receiver(load);
  auto callback_url = receiver.start();
  if (!callback_url) {
    return tl::unexpected(callback_url.error());
  }
  troupe_setup setup;
  setup.provider_base_url = *mock_origin + "/v1";
  setup.agents = {{std::string(chat_agent_name), {}, 4}};
  setup.settings = {{"api.run_retention_ms", "1000"}};
  auto opened = open_troupe(o, setup);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  auto troupe = std::move(*opened);
  report.targets["troupe"] = troupe->describe();
  if (auto ok = create_channel(*troupe, *callback_url); !ok) {
    return fail(ok.error().code, fmt::format("{}\n{}", ok.error().message, troupe->log_tail()));
  }
  load.delivery.url = troupe->origin() + "/api/v1/webhooks/channels/" + std::string(channel_name);
  load.delivery.headers = {{"Content-Type", "application/json"},
                           {"X-Webhook-Token", std::string(channel_token)}};

  const pid_t pid = troupe->pid();
  const auto cpu_before = pid > 0 ? read_process_cpu(pid) : expected<std::chrono::microseconds>{};
  auto* lp = &load;
  workload_fn deliver = [lp](net::http_client& client, std::chrono::milliseconds timeout) {
    return deliver_next(client, lp, timeout);
  };
  load_options lo;
  lo.concurrency = o.concurrency ? o.concurrency : 64;
  lo.max_requests = load.total;
  lo.duration = std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(30'000));
  lo.progress_label = o.progress ? "channel: deliveries" : "";
  const auto start_ns = now_ns();
  const auto delivered = run_load(lo, deliver);
  const bool all = receiver.wait_for_all(std::chrono::milliseconds(120'000));
  const auto cpu_after = pid > 0 ? read_process_cpu(pid) : expected<std::chrono::microseconds>{};

  latency_histogram reply_latency;
  std::int64_t last_reply_ns = start_ns;
  for (std::size_t i = 0; i < load.total; ++i) {
    const auto sent = load.sent_ns[i].load();
    const auto replied = load.replied_ns[i].load();
    if (sent != 0 && replied != 0) {
      reply_latency.record_ns(
          static_cast<std::uint64_t>(std::max<std::int64_t>(replied - sent, 0)));
      last_reply_ns = std::max(last_reply_ns, replied);
    }
  }
  const double seconds = static_cast<double>(last_reply_ns - start_ns) / 1e9;
  const auto answered = receiver.answered();
  report.add("threads", static_cast<double>(threads));
  report.add("messages", static_cast<double>(load.total));
  report.add("deliveries_accepted", static_cast<double>(delivered.succeeded));
  add_errors(report, delivered);
  report.add("replies", static_cast<double>(answered));
  report.add("replies_missing", static_cast<double>(load.total - answered));
  report.add("replies_duplicated", static_cast<double>(receiver.duplicates()));
  report.add("replies_out_of_order", static_cast<double>(receiver.out_of_order()));
  report.add("replies_unrecognised", static_cast<double>(receiver.unrecognised()));
  report.add("seconds", seconds);
  report.add("messages_per_s", seconds > 0 ? static_cast<double>(answered) / seconds : 0);
  report.add_latency("delivery", delivered.latency);
  report.add_latency("reply", reply_latency);
  if (cpu_before && cpu_after && answered > 0) {
    report.add("troupe_cpu_ms_per_message",
               static_cast<double>((*cpu_after - *cpu_before).count()) / 1e3 /
                   static_cast<double>(answered));
  }
  report.notes.push_back(fmt::format(
      "{} threads x {} messages into a generic webhook channel (queue_policy followup), sent "
      "by {} concurrent deliverers, message i to thread i % threads; delivery = the webhook's "
      "answer (journaled); reply = from the delivery's send to its reply at the callback "
      "receiver; messages/s = replies / (last reply - first send); only replies count",
      threads, per_thread, lo.concurrency));
  if (!all) {
    return fail(errc::timeout, fmt::format("{} of {} messages had no reply 120 s after the last "
                                           "delivery\n{}",
                                           load.total - answered, load.total, troupe->log_tail()));
  }
  return {};
}

} // namespace troupe::bench::detail
