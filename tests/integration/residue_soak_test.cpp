// The residue soak: `/v1/chat/completions` requests at concurrency 8 against the real
// `troupe serve` binary (api.run_retention_ms = 0) and a mock-llm on loopback. A request
// answered leaves nothing behind: the node's resident set (VmRSS of its process) at the
// end stays within 10% of its value after the warm-up (the first 10% of the requests).
// `make test` runs 10,000 requests (20 to 70 s on 2 cores, by their load); `make soak`
// (and `make check`) the issue's 200,000 after a warm-up of 10,000.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t concurrency = 8;

/// VmRSS of process `pid` in KiB, from /proc/<pid>/status; 0 when unreadable.
std::uint64_t resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) {
      return std::stoull(line.substr(6));
    }
  }
  return 0;
}

/// One keep-alive connection that sends a request and reads its whole response (by
/// Content-Length, or to the last chunk).
class keep_alive_client {
public:
  explicit keep_alive_client(std::uint16_t port) : connection_(port) {}

  /// The status of the answer to `request`; 0 when the connection failed or timed out.
  int exchange(const std::string& request) {
    connection_.send(request);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    std::size_t head_end = std::string::npos;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) {
        return 0;
      }
    }
    const auto head = buffer_.substr(0, head_end + 4);
    const auto status = status_of(head);
    const auto length = header_value(head, "Content-Length");
    std::size_t end = 0;
    if (!length.empty()) {
      end = head_end + 4 + std::stoull(length);
      while (buffer_.size() < end) {
        if (!fill(deadline)) {
          return 0;
        }
      }
    } else {
      std::size_t last = std::string::npos;
      while ((last = buffer_.find("\r\n0\r\n\r\n", head_end)) == std::string::npos) {
        if (!fill(deadline)) {
          return 0;
        }
      }
      end = last + 7;
    }
    if (status != 200) {
      last_failure = buffer_.substr(0, end);
    }
    buffer_.erase(0, end);
    return status;
  }

  /// The last answer that was not a 200, whole.
  std::string last_failure;

private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    while (std::chrono::steady_clock::now() < deadline && !connection_.closed()) {
      auto more = connection_.read_some(100ms);
      if (!more.empty()) {
        buffer_ += more;
        return true;
      }
    }
    return false;
  }

  raw_client connection_;
  std::string buffer_;
};

std::string completion_request(const std::string& token) {
  const std::string body =
      R"({"model":"soak","messages":[{"role":"user","content":"say something short"}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

/// How many requests did not answer 200, and the first of those answers.
struct failures {
  std::size_t count = 0;
  std::string first;
};

/// Sends `count` requests over `concurrency` keep-alive connections.
failures send_requests(std::uint16_t port, const std::string& token, std::size_t count) {
  std::string first_failure;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failed{0};
  std::mutex first_failure_mutex;
  const auto request = completion_request(token);
  std::vector<std::thread> clients;
  for (std::size_t c = 0; c < concurrency; ++c) {
    clients.emplace_back([&] {
      std::optional<keep_alive_client> client;
      while (next.fetch_add(1) < count) {
        if (!client) {
          client.emplace(port);
        }
        if (client->exchange(request) != 200) {
          if (failed++ == 0) {
            const std::lock_guard lock(first_failure_mutex);
            first_failure = client->last_failure;
          }
          client.reset(); // a fresh connection for the next one
        }
      }
    });
  }
  for (auto& t : clients) {
    t.join();
  }
  return {failed.load(), std::move(first_failure)};
}

/// Runs the soak: `warmup` requests, the resident set, the rest of `total`, the resident
/// set again, which must stay within `bound` times the first.
void soak(std::size_t warmup, std::size_t total, double bound) {
  mock_llm_fixture mock;
  api_server s("run_retention_ms = 0\nrate_per_second = 1000000\nrate_burst = 1000000\n",
               "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
                   mock.base_url() +
                   "\"\n[[agents]]\nname = \"soak\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\n"
                   "tools = [\"finish\"]\n");
  REQUIRE(s.port() != 0);
  const auto pid = s.process().pid();

  const auto started = std::chrono::steady_clock::now();
  const auto warm_failed = send_requests(s.port(), s.admin(), warmup);
  INFO(warm_failed.first);
  CHECK(warm_failed.count == 0);
  const auto warm_kib = resident_kib(pid);
  REQUIRE(warm_kib > 0);
  const auto failed = send_requests(s.port(), s.admin(), total - warmup);
  const auto end_kib = resident_kib(pid);
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const auto stop_started = std::chrono::steady_clock::now();
  s.process().signal(SIGTERM);
  const auto code = s.process().wait_exit(60s);
  const auto stop_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_started).count();

  const auto growth_kib = static_cast<double>(end_kib) - static_cast<double>(warm_kib);
  INFO(total << " requests in " << seconds << " s; VmRSS " << warm_kib << " KiB after " << warmup
             << ", " << end_kib
             << " KiB at the end: " << growth_kib * 1024.0 / static_cast<double>(total - warmup)
             << " bytes per request after the warm-up; SIGTERM to exit " << stop_seconds << " s");
  INFO(failed.first);
  CHECK(failed.count == 0);
  CHECK(mock.stats().completion_requests + warm_failed.count + failed.count >= total);
  CHECK(static_cast<double>(end_kib) <= bound * static_cast<double>(warm_kib));
  CHECK(code == 0);
}

} // namespace

// The residue at make test's scale. History (release, 2 loaded cores): 12,760 bytes kept
// per request on 2026-12-02 morning, with 1-2% of the requests answered 504; 6,094 after
// 896c1b2 (no 504); 281 after a run's self-sent deadline left with the run and an ask's
// helper stopped monitoring the actor it asked (the ended actors' memory had stayed,
// held by the deadline message for minutes and by the monitor for the asked actor's life).
// The short form of the soak below. Its bound is 15%, not the acceptance figure's 10%:
// this early the allocator's arenas are still growing into their steady size (the end
// stood 1.07-1.10x above the value after 4,000 from run to run, 1.09-1.17x after only
// 1,000), while the 200,000 run, past that, stays flat. A residue per request of the
// size this soak was written for (6 KB, 2 December morning) ends over twice as high.
// glibc's default of up to 8 arenas per core let each thread's arena keep its own peak,
// so RSS crept up (1.16 at this scale on CI, 1.20 at 200,000) with the live heap flat;
// `troupe serve` limits them (actors.malloc_arenas, runtime/malloc_arenas.hpp), and the
// end now stands 1.03-1.08x above the value after 4,000.
TEST_CASE("14000 chat completions at concurrency 8 leave the node's RSS within 15% of its "
          "value after the first 4000",
          "[integration][soak]") {
  soak(4'000, 14'000, 1.15);
}

// Hidden (make soak, make check): the issue's acceptance figure.
TEST_CASE("200000 chat completions at concurrency 8 leave the node's RSS within 10% of its "
          "value after the first 10000",
          "[integration][soak][.slow]") {
  soak(10'000, 200'000, 1.10);
}
