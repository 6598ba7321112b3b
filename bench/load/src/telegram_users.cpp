// `troupe bench --scenario channel --channel-type telegram --peers bench/peers` (and
// `--users 1,10,100` for troupe alone): N simulated Telegram users, each a private chat with
// one bot, each sending its messages one after another (the next once the previous one has
// its reply), through the fake Bot API (fakes/fake_telegram) in polling mode: the runtime
// long-polls getUpdates there and answers with sendMessage. troupe's telegram channel
// (mode = "poll") and OpenClaw's (channels.telegram.apiRoot = the fake) get the same fake, the
// same mock-llm and the same users, one after the other. Latency runs from the moment an
// update is queued at the fake to the sendMessage that answers it; a second sendMessage to a
// chat with nothing outstanding is a duplicate; a message with no answer at the end is lost.

#include <sys/types.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "channel_drivers/channel_driver.hpp"
#include "openclaw_gateway.hpp"
#include "scenario_support.hpp"
#include "support/fake_telegram.hpp"
#include "troupe/bench/process_stats.hpp"

namespace troupe::bench::detail {

namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr auto token_env = "BENCH_TELEGRAM_BOT_TOKEN";
constexpr auto bot_token = "123456:BENCH-bot-token";
constexpr std::string_view channel_name = "bench-telegram";
/// Level k's users are the private chats 200,000,000 + 1,000,000·k + u; the warm-up user is
/// 199,999,999.
constexpr std::int64_t first_chat = 200'000'000;
constexpr std::int64_t warmup_chat = first_chat - 1;
/// The mock's answers: "mock-llm reply N to: <the first 40 characters of the last user
/// message>" and filler, 16 words, so that troupe's echo of "bench c<i>" fits.
constexpr unsigned answer_tokens = 16;

std::string utc_text() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string loadavg_text() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line;
}

/// A sendMessage the fake accepted.
struct sent_event {
  std::int64_t chat = 0;
  std::string text;
  std::int64_t at_ns = 0;
};

/// The fake's sendMessage hook feeds this queue (on the fake's io thread); the users' loop
/// reads it.
struct inbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<sent_event> events;

  void push(sent_event e) {
    {
      const std::lock_guard lock(mutex);
      events.push_back(std::move(e));
    }
    changed.notify_all();
  }
  std::optional<sent_event> pop(std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex);
    if (!changed.wait_for(lock, limit, [&] { return !events.empty(); })) {
      return std::nullopt;
    }
    auto e = std::move(events.front());
    events.pop_front();
    return e;
  }
};

/// What one run of users measured.
struct users_result {
  std::size_t users = 0;
  std::size_t messages = 0;
  std::size_t replies = 0;
  std::size_t duplicates = 0;
  std::size_t lost = 0;
  /// Replies whose text lacks the tag of the message they answer (checked for troupe, whose
  /// mock answer repeats the message; OpenClaw puts its own context before the message).
  std::size_t tag_mismatches = 0;
  /// sendMessage to a chat that is no user of this run.
  std::size_t strangers = 0;
  latency_histogram latency;
  double seconds = 0;
};

/// Users `first .. first + users` each send `per_user` messages "bench c<i>" in turn; waits
/// for every answer, giving up when no sendMessage arrives for `quiet_limit`; then listens
/// `grace` longer for late duplicates.
users_result run_users(test::fake_telegram& fake, inbox& box, std::int64_t first, std::size_t users,
                       std::size_t per_user, bool check_tags, std::chrono::milliseconds quiet_limit,
                       std::chrono::milliseconds grace) {
  users_result r;
  r.users = users;
  r.messages = users * per_user;
  struct user {
    std::size_t sent = 0;
    bool outstanding = false;
    std::size_t message = 0;
    std::int64_t sent_ns = 0;
  };
  std::vector<user> us(users);
  std::size_t next_message = 0;
  std::size_t done = 0;
  const auto send = [&](std::size_t u) {
    test::telegram_incoming m;
    m.chat_id = first + static_cast<std::int64_t>(u);
    m.from_id = m.chat_id;
    m.from_first_name = fmt::format("User{}", u);
    m.text = fmt::format("bench c{}", next_message);
    us[u].message = next_message++;
    us[u].outstanding = true;
    ++us[u].sent;
    us[u].sent_ns = channel_now_ns();
    fake.push_message(m);
  };
  {
    // Drop what an earlier run left (late answers of the warm-up).
    const std::lock_guard lock(box.mutex);
    box.events.clear();
  }
  const auto start_ns = channel_now_ns();
  std::int64_t last_reply_ns = start_ns;
  for (std::size_t u = 0; u < users; ++u) {
    send(u);
  }
  const auto take = [&](const sent_event& e) {
    const auto u = e.chat - first;
    if (u < 0 || static_cast<std::size_t>(u) >= users) {
      ++r.strangers;
      return;
    }
    auto& who = us[static_cast<std::size_t>(u)];
    if (!who.outstanding) {
      ++r.duplicates;
      return;
    }
    who.outstanding = false;
    ++r.replies;
    r.latency.record_ns(
        static_cast<std::uint64_t>(std::max<std::int64_t>(e.at_ns - who.sent_ns, 0)));
    last_reply_ns = std::max(last_reply_ns, e.at_ns);
    if (check_tags && e.text.find(fmt::format("bench c{} ", who.message)) == std::string::npos &&
        !e.text.ends_with(fmt::format("bench c{}", who.message))) {
      ++r.tag_mismatches;
    }
    if (who.sent < per_user) {
      send(static_cast<std::size_t>(u));
    } else {
      ++done;
    }
  };
  while (done < users) {
    auto e = box.pop(quiet_limit);
    if (!e) {
      break; // nothing for quiet_limit: the rest is lost
    }
    take(*e);
  }
  r.seconds = static_cast<double>(last_reply_ns - start_ns) / 1e9;
  const auto grace_end = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < grace_end) {
    if (auto e = box.pop(std::chrono::duration_cast<std::chrono::milliseconds>(
            grace_end - std::chrono::steady_clock::now()))) {
      take(*e);
    }
  }
  r.lost = r.messages - std::min(r.replies, r.messages);
  return r;
}

/// One level of one runtime, with its process readings.
struct level_row {
  std::string runtime;
  users_result result;
  std::uint64_t rss_idle_kib = 0;
  std::uint64_t rss_peak_kib = 0;
  std::size_t processes = 0;
  double cpu_ms_per_message = 0;
  std::string started_at;
  std::string loadavg_before;
  std::string loadavg_after;
};

/// A runtime under test: its pid (the root of its process tree) and how to stop it.
struct runtime_under_test {
  std::string name;
  pid_t pid = -1;
  bool check_tags = false;
};

std::vector<level_row> measure_levels(const runtime_under_test& rt, test::fake_telegram& fake,
                                      inbox& box, const std::vector<unsigned>& levels,
                                      std::size_t per_user_given, std::size_t warmup, bool progress,
                                      std::vector<std::string>& problems) {
  std::vector<level_row> rows;
  // Warm-up: one user, `warmup` messages, unrecorded (OpenClaw's first answer loads its
  // agent runtime: 8-25 s here).
  const auto warm = run_users(fake, box, warmup_chat, 1, warmup, false, 300s, 0ms);
  if (warm.replies < warmup) {
    problems.push_back(
        fmt::format("{}: {} of {} warm-up messages answered", rt.name, warm.replies, warmup));
  }
  for (std::size_t k = 0; k < levels.size(); ++k) {
    const std::size_t n = levels[k];
    const std::size_t per_user =
        per_user_given ? per_user_given : std::max<std::size_t>(1, (20 + n - 1) / n);
    std::this_thread::sleep_for(2s); // settle before the idle reading
    level_row row;
    row.runtime = rt.name;
    if (auto m = read_tree_memory(rt.pid); m) {
      row.rss_idle_kib = m->rss_kib;
    }
    row.processes = process_tree(rt.pid).size();
    const auto cpu_before = read_tree_cpu(rt.pid);
    std::optional<memory_sampler> sampler;
    sampler.emplace(rt.pid, 50ms, true);
    row.loadavg_before = loadavg_text();
    row.started_at = utc_text();
    if (progress) {
      fmt::print(stderr, "[telegram] {} N={} x {} messages (loadavg {})\n", rt.name, n, per_user,
                 row.loadavg_before);
    }
    const auto first = first_chat + static_cast<std::int64_t>(k) * 1'000'000;
    row.result = run_users(fake, box, first, n, per_user, rt.check_tags, 120s, 3s);
    const auto cpu_after = read_tree_cpu(rt.pid);
    row.rss_peak_kib = std::max(sampler->peak_kib(), row.rss_idle_kib);
    sampler.reset();
    if (auto m = read_tree_memory(rt.pid); m) {
      row.rss_peak_kib = std::max(m->rss_kib, row.rss_peak_kib);
    }
    row.loadavg_after = loadavg_text();
    if (cpu_before && cpu_after && row.result.replies > 0) {
      row.cpu_ms_per_message = static_cast<double>((*cpu_after - *cpu_before).count()) / 1e3 /
                               static_cast<double>(row.result.messages);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

expected<void> create_poll_channel(const troupe_server& troupe, const test::fake_telegram& fake) {
  auto t = troupe_post(troupe, "/api/v1/channels");
  t.body = fmt::format(R"({{"name":{},"type":"telegram","agent":{},"mode":"poll",)"
                       R"("token_env":"{}","api_base":{},"stream_edits":false,)"
                       R"("session_scope":"thread","queue_policy":"followup"}})",
                       json_text(channel_name), json_text(chat_agent_name), token_env,
                       json_text(fake.api_base()));
  auto created = fetch_blocking(make_request(t, std::chrono::milliseconds(10'000)));
  if (!created) {
    return tl::unexpected(created.error());
  }
  if (created->status != 201 && created->status != 200) {
    return fail(errc::unavailable, fmt::format("creating the telegram channel answered {}: {}",
                                               created->status, created->body));
  }
  return {};
}

json::object bot_api_calls(const test::fake_telegram& fake) {
  std::map<std::string, std::map<unsigned, std::size_t>> counts;
  for (const auto& c : fake.calls()) {
    ++counts[c.method][c.status];
  }
  json::object out;
  for (const auto& [method, statuses] : counts) {
    json::object by_status;
    for (const auto& [status, n] : statuses) {
      by_status[std::to_string(status)] = n;
    }
    out[method] = std::move(by_status);
  }
  return out;
}

void add_rows(const std::vector<level_row>& rows, const std::vector<unsigned>& levels,
              bench_report& report) {
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& row = rows[k];
    const auto& r = row.result;
    const auto p = fmt::format("telegram.{}.n{}", row.runtime, levels[k]);
    report.add(p + ".messages", static_cast<double>(r.messages));
    report.add(p + ".replies", static_cast<double>(r.replies));
    report.add(p + ".duplicates", static_cast<double>(r.duplicates));
    report.add(p + ".lost", static_cast<double>(r.lost));
    report.add(p + ".strangers", static_cast<double>(r.strangers));
    if (row.runtime == "troupe") {
      report.add(p + ".tag_mismatches", static_cast<double>(r.tag_mismatches));
    }
    report.add(p + ".replies_per_s",
               r.seconds > 0 ? static_cast<double>(r.replies) / r.seconds : 0);
    report.add_latency(p + ".latency", r.latency);
    report.add(p + ".rss_idle_kib", static_cast<double>(row.rss_idle_kib));
    report.add(p + ".rss_peak_kib", static_cast<double>(row.rss_peak_kib));
    report.add(p + ".processes", static_cast<double>(row.processes));
    report.add(p + ".cpu_ms_per_message", row.cpu_ms_per_message);
    json::object step;
    step["runtime"] = row.runtime;
    step["users"] = levels[k];
    step["messages"] = r.messages;
    step["replies"] = r.replies;
    step["duplicates"] = r.duplicates;
    step["lost"] = r.lost;
    step["replies_per_s"] = r.seconds > 0 ? static_cast<double>(r.replies) / r.seconds : 0;
    step["p50_ms"] = static_cast<double>(r.latency.percentile_ns(50)) / 1e6;
    step["p99_ms"] = static_cast<double>(r.latency.percentile_ns(99)) / 1e6;
    step["rss_idle_kib"] = row.rss_idle_kib;
    step["rss_peak_kib"] = row.rss_peak_kib;
    step["processes"] = row.processes;
    step["cpu_ms_per_message"] = row.cpu_ms_per_message;
    step["started_at"] = row.started_at;
    step["loadavg_before"] = row.loadavg_before;
    step["loadavg_after"] = row.loadavg_after;
    report.steps.push_back(std::move(step));
  }
}

std::string side_by_side(const std::vector<level_row>& troupe_rows,
                         const std::vector<level_row>& claw_rows,
                         const std::vector<unsigned>& levels, bench_report& report) {
  std::string table = fmt::format(
      "telegram: N users -> one bot through the same Bot API fake (polling), side by side "
      "(ratios: troupe / openclaw)\n  {:>4} {:<9} {:>9} {:>9} {:>9} {:>6} {:>5} {:>9} {:>9} "
      "{:>10} {:>10} {:>8} {:>8} {:>8}\n",
      "N", "runtime", "replies/s", "p50 ms", "p99 ms", "dupl", "lost", "RSS idle", "RSS peak",
      "CPU ms/msg", "replies/s x", "p50 x", "peak x", "CPU x");
  const auto mib = [](std::uint64_t kib) { return static_cast<double>(kib) / 1024.0; };
  const auto ms = [](const latency_histogram& h, double pct) {
    return static_cast<double>(h.percentile_ns(pct)) / 1e6;
  };
  const auto rate = [](const users_result& r) {
    return r.seconds > 0 ? static_cast<double>(r.replies) / r.seconds : 0.0;
  };
  const auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  for (std::size_t k = 0; k < levels.size(); ++k) {
    for (const auto* rows : {&troupe_rows, &claw_rows}) {
      if (k >= rows->size()) {
        continue;
      }
      const auto& row = (*rows)[k];
      const auto& r = row.result;
      std::string ratios;
      if (rows == &claw_rows && k < troupe_rows.size()) {
        const auto& t = troupe_rows[k];
        const double rx = ratio(rate(t.result), rate(r));
        const double px = ratio(ms(t.result.latency, 50), ms(r.latency, 50));
        const double mx = ratio(mib(t.rss_peak_kib), mib(row.rss_peak_kib));
        const double cx = ratio(t.cpu_ms_per_message, row.cpu_ms_per_message);
        ratios = fmt::format(" {:>9.1f}x {:>7.4f}x {:>7.4f}x {:>7.4f}x", rx, px, mx, cx);
        const auto p = fmt::format("telegram.n{}.troupe_vs_openclaw", levels[k]);
        report.add(p + ".replies_per_s_ratio", rx);
        report.add(p + ".p50_ratio", px);
        report.add(p + ".p99_ratio", ratio(ms(t.result.latency, 99), ms(r.latency, 99)));
        report.add(p + ".rss_peak_ratio", mx);
        report.add(p + ".cpu_per_message_ratio", cx);
      }
      table += fmt::format("  {:>4} {:<9} {:>9.2f} {:>9.1f} {:>9.1f} {:>6} {:>5} {:>8.1f}M "
                           "{:>8.1f}M {:>10.2f}{}\n",
                           levels[k], row.runtime, rate(r), ms(r.latency, 50), ms(r.latency, 99),
                           r.duplicates, r.lost, mib(row.rss_idle_kib), mib(row.rss_peak_kib),
                           row.cpu_ms_per_message, ratios);
    }
  }
  return table;
}

} // namespace

expected<void> run_telegram_users(const scenario_options& o, bench_report& report) {
  std::vector<unsigned> levels = o.users.empty() ? std::vector<unsigned>{1, 10, 100} : o.users;
  const std::size_t warmup = o.warmup_messages ? o.warmup_messages : 3;
  mock::mock_llm_options mock_options;
  mock_options.tokens = o.tokens ? o.tokens : answer_tokens;
  local_mock mock(std::move(mock_options));
  auto mock_origin = mock.start();
  if (!mock_origin) {
    return tl::unexpected(mock_origin.error());
  }
  report.targets["mock"] = *mock_origin + "/v1";
  report.targets["mock_kind"] = fmt::format(
      "mock-llm in-process on 127.0.0.1:0, instant {}-word answers repeating the first 40 "
      "characters of the last user message",
      mock_options.tokens);
  report.targets["channel_type"] = "telegram";
  report.targets["platform"] =
      "the fake Bot API (fakes/fake_telegram) in polling mode: getUpdates long polls, "
      "sendMessage, sendChatAction, deleteMessage, (set|delete|get)MyCommands, getMe, "
      "deleteWebhook; a fresh fake per runtime";
  std::vector<std::string> problems;
  json::array level_list;
  for (const auto n : levels) {
    level_list.emplace_back(n);
  }
  report.extra["telegram_users"] = level_list;

  // -- troupe: its telegram channel in poll mode --
  std::vector<level_row> troupe_rows;
  {
    inbox box;
    test::fake_telegram fake(bot_token);
    fake.on_sent([&box](const test::telegram_sent& m) {
      box.push({m.chat_id, m.text, channel_now_ns()});
    });
    ::setenv(token_env, bot_token, 1);
    troupe_setup setup;
    setup.provider_base_url = *mock_origin + "/v1";
    setup.agents = {{std::string(chat_agent_name), {}, 4}};
    setup.settings = {{"api.run_retention_ms", "1000"},
                      {"actors.conversation_idle_ms", "1000"},
                      {"secrets.allowed_env", fmt::format(R"(["{}"])", token_env)}};
    auto opened = open_troupe(o, setup);
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    auto troupe = std::move(*opened);
    report.targets["troupe"] = troupe->describe();
    if (auto ok = create_poll_channel(*troupe, fake); !ok) {
      return fail(ok.error().code, fmt::format("{}\n{}", ok.error().message, troupe->log_tail()));
    }
    report.extra["troupe_channel"] =
        json::object{{"type", "telegram"},         {"mode", "poll"},
                     {"stream_edits", false},      {"session_scope", "thread"},
                     {"queue_policy", "followup"}, {"agent", chat_agent_name},
                     {"api_base", fake.api_base()}};
    if (!fake.wait_for_calls("getUpdates", 1, 30s)) {
      return fail(errc::timeout, fmt::format("troupe's telegram channel did not poll the fake "
                                             "within 30 s\n{}",
                                             troupe->log_tail()));
    }
    const runtime_under_test rt{"troupe", troupe->pid(), true};
    troupe_rows = measure_levels(rt, fake, box, levels, o.runs, warmup, o.progress, problems);
    report.extra["troupe_bot_api_calls"] = bot_api_calls(fake);
    if (const int status = troupe->stop(std::chrono::seconds(15)); status != 0) {
      problems.push_back(fmt::format("troupe exited with status {}", status));
    }
  }
  add_rows(troupe_rows, levels, report);
  for (std::size_t k = 0; k < troupe_rows.size(); ++k) {
    const auto& r = troupe_rows[k].result;
    if (r.lost != 0 || r.duplicates != 0 || r.tag_mismatches != 0) {
      problems.push_back(fmt::format("troupe at N = {}: {} lost, {} duplicated, {} answering "
                                     "another message, of {}",
                                     levels[k], r.lost, r.duplicates, r.tag_mismatches,
                                     r.messages));
    }
  }

  // -- OpenClaw: its telegram channel against a fresh fake --
  std::vector<level_row> claw_rows;
  if (!o.peers_dir.empty()) {
    inbox box;
    test::fake_telegram fake(bot_token);
    fake.on_sent([&box](const test::telegram_sent& m) {
      box.push({m.chat_id, m.text, channel_now_ns()});
    });
    openclaw_options oo;
    oo.peers_dir = o.peers_dir;
    oo.mock_base_url = *mock_origin + "/v1";
    oo.api_root = fake.api_base();
    oo.bot_token = bot_token;
    if (o.progress) {
      fmt::print(stderr, "[telegram] starting OpenClaw (40-160 s on this machine)\n");
    }
    auto gw = openclaw_gateway::start(oo);
    if (!gw) {
      return tl::unexpected(gw.error());
    }
    report.extra["openclaw"] = (*gw)->ready();
    if (!fake.wait_for_calls("getUpdates", 1, 300s)) {
      auto tail = (*gw)->log_tail();
      return fail(
          errc::timeout,
          fmt::format("OpenClaw's telegram channel did not poll the fake within 300 s\n{}", tail));
    }
    const runtime_under_test rt{"openclaw", (*gw)->gateway_pid(), false};
    claw_rows = measure_levels(rt, fake, box, levels, o.runs, warmup, o.progress, problems);
    report.extra["openclaw_bot_api_calls"] = bot_api_calls(fake);
    (*gw)->stop();
    add_rows(claw_rows, levels, report);
  }
  report.tables.push_back(side_by_side(troupe_rows, claw_rows, levels, report));
  report.notes.push_back(
      "each of N users is a private chat with the bot and sends its messages one at a time "
      "(\"bench c<i>\"), the next when the previous has its answer; default messages per user: "
      "ceil(20 / N) (--runs sets it); a warm-up user's messages first (--warmup-messages, "
      "default 3), unrecorded. latency = the update queued at the fake -> the sendMessage to "
      "that chat; replies/s = replies / (last reply - first message); duplicates = a "
      "sendMessage to a chat with nothing outstanding; lost = no answer within 120 s of the "
      "last one; 3 s more are watched for late duplicates");
  report.notes.push_back(
      "memory: VmRSS summed over the runtime's process tree (troupe: one process; OpenClaw: the "
      "gateway and its helpers), idle 2 s before each level, peak sampled every 50 ms; CPU = "
      "the tree's utime+stime / messages. troupe's answers are checked to repeat their message's "
      "tag (tag_mismatches); OpenClaw's cannot be (its prompt puts its context before the "
      "message, so the mock's echo does not reach the tag), so they are matched by chat");
  for (const auto& p : problems) {
    report.notes.push_back("PROBLEM: " + p);
  }
  return {};
}

} // namespace troupe::bench::detail
