// The channel scenario: messages into a channel of `--channel-type` (the generic webhook by
// default; channel_drivers/ holds one driver per platform), replies out at the platform's
// side (the webhook's callback receiver, or a fake platform). Every message is a separate
// platform delivery (`POST /api/v1/webhooks/channels/{name}`), signed as the platform signs
// it; its latency runs from the send of the delivery to the arrival of its reply at the
// platform, so it covers verification, the journal, the thread actor, the run on the
// (instant) mock model, the outbox and the platform's send API (with its access token).

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "scenario_support.hpp"
#include "troupe/bench/process_stats.hpp"
#include "troupe/net/http_server.hpp"
#include "troupe/runtime/metrics.hpp"

namespace troupe::bench::detail {

namespace asio = boost::asio;

namespace {

constexpr std::string_view channel_name = "bench-channel";

asio::awaitable<std::optional<std::string>> deliver_next(net::http_client& client, channel_load* l,
                                                         const channel_driver* driver,
                                                         const std::string* route,
                                                         std::chrono::milliseconds timeout) {
  if (l->next >= l->total) {
    co_return std::string("no_message_left");
  }
  const auto i = l->next++;
  const auto t = driver->delivery(*route, i, i % l->threads, fmt::format("bench c{}", i));
  l->sent_ns[i].store(channel_now_ns());
  auto sending = send_request(client, &t, timeout, nullptr);
  co_return co_await std::move(sending);
}

expected<void> create_channel(const troupe_server& troupe, const channel_driver& driver,
                              const std::string& route) {
  auto t = troupe_post(troupe, "/api/v1/channels");
  t.body = driver.channel_body(channel_name, chat_agent_name, route);
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
  if (o.channel_type == "telegram" && (!o.peers_dir.empty() || !o.users.empty())) {
    return run_telegram_users(o, report);
  }
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

  auto made = make_channel_driver(o.channel_type);
  if (!made) {
    return tl::unexpected(made.error());
  }
  const auto driver = std::move(*made);
  channel_load load(threads, per_thread);
  reply_tracker receiver(load);
  if (auto started = driver->start(receiver); !started) {
    return started;
  }
  report.targets["channel_type"] = o.channel_type.empty() ? "webhook" : o.channel_type;
  report.targets["platform"] = driver->describe();
  troupe_setup setup;
  setup.provider_base_url = *mock_origin + "/v1";
  setup.agents = {{std::string(chat_agent_name), {}, 4}};
  setup.settings = {{"api.run_retention_ms", "1000"}};
  for (auto& kv : driver->settings()) {
    setup.settings.push_back(std::move(kv));
  }
  auto opened = open_troupe(o, setup);
  if (!opened) {
    return tl::unexpected(opened.error());
  }
  auto troupe = std::move(*opened);
  report.targets["troupe"] = troupe->describe();
  const auto route = troupe->origin() + "/api/v1/webhooks/channels/" + std::string(channel_name);
  if (auto ok = create_channel(*troupe, *driver, route); !ok) {
    return fail(ok.error().code, fmt::format("{}\n{}", ok.error().message, troupe->log_tail()));
  }
  if (auto ready = driver->await_channel(std::chrono::milliseconds(30'000)); !ready) {
    return fail(ready.error().code,
                fmt::format("{}\n{}", ready.error().message, troupe->log_tail()));
  }

  const pid_t pid = troupe->pid();
  const auto cpu_before = pid > 0 ? read_process_cpu(pid) : expected<std::chrono::microseconds>{};
  auto* lp = &load;
  const auto* dp = driver.get();
  const auto* rp = &route;
  workload_fn deliver = [lp, dp, rp](net::http_client& client, std::chrono::milliseconds timeout) {
    return deliver_next(client, lp, dp, rp, timeout);
  };
  load_options lo;
  lo.concurrency = o.concurrency ? o.concurrency : 64;
  lo.max_requests = load.total;
  // The run ends when every message is sent, or at --duration when that is set longer
  // than its 5 s default (then the replies to the messages sent count).
  lo.duration =
      o.duration > std::chrono::milliseconds(5'000) ? o.duration : std::chrono::minutes(30);
  lo.timeout = std::max(o.timeout, std::chrono::milliseconds(30'000));
  lo.progress_label = o.progress ? "channel: deliveries" : "";
  const auto start_ns = channel_now_ns();
  const auto delivered = run_load(lo, deliver);
  // With a --duration cap, only the messages sent are waited for.
  const auto sent_count = std::min(load.next, load.total);
  const bool all = receiver.wait_for(sent_count, std::chrono::milliseconds(120'000));
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
  report.add("messages", static_cast<double>(sent_count));
  report.add("deliveries_accepted", static_cast<double>(delivered.succeeded));
  add_errors(report, delivered);
  report.add("replies", static_cast<double>(answered));
  report.add("replies_missing", static_cast<double>(sent_count - std::min(answered, sent_count)));
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
      "{} threads x {} messages into {} (queue_policy followup), sent "
      "by {} concurrent deliverers, message i to thread i % threads; delivery = the webhook's "
      "answer (journaled); reply = from the delivery's send to its reply at the platform "
      "(receiver or fake); messages/s = replies / (last reply - first send); only replies count",
      threads, per_thread, driver->describe(), lo.concurrency));
  if (!all) {
    return fail(errc::timeout, fmt::format("{} of {} messages had no reply 120 s after the last "
                                           "delivery\n{}",
                                           sent_count - std::min(answered, sent_count), sent_count,
                                           troupe->log_tail()));
  }
  return {};
}

} // namespace troupe::bench::detail
