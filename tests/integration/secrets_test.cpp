// Secrets with the real `troupe serve` binary: a run at log level trace with
// TROUPE_CURL_VERBOSE=1 prints no provider key and no token, while the keys really are
// sent upstream; a key set over the API is stored sealed (the database file's bytes do
// not contain it); the key file is created 0600 and a looser one stops the start; key
// variables outside the rule are refused in the config file and over the API.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/raw_http.hpp"
#include "support/troupe_process.hpp"
#include "troupe/runtime/crypto.hpp"
#include "troupe/storage/connection.hpp"
#include "troupe/storage/repositories.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// A model endpoint that records the Authorization header of every request and answers
// /models and /chat/completions (streamed or whole) with fixed content: proof that
// troupe sent the key it stores sealed.
class key_capture_server {
public:
  key_capture_server() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("capture server: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~key_capture_server() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  key_capture_server(const key_capture_server&) = delete;
  key_capture_server& operator=(const key_capture_server&) = delete;

  std::string base_url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }
  /// The Authorization values received, in order, with the request path.
  std::vector<std::string> authorizations() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

private:
  void serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        continue;
      }
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        answer(fd);
        ::close(fd);
      }
    }
  }

  // Reads one request (headers and Content-Length body) within a few seconds.
  static std::string read_request(int fd) {
    std::string in;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    std::size_t want = std::string::npos;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto end = in.find("\r\n\r\n");
      if (end != std::string::npos && want == std::string::npos) {
        std::string lower = in.substr(0, end);
        for (auto& c : lower) {
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        const auto cl = lower.find("content-length:");
        want = end + 4 + (cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15)));
      }
      if (want != std::string::npos && in.size() >= want) {
        return in;
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        continue;
      }
      char buffer[8192];
      const auto n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) {
        return in;
      }
      in.append(buffer, static_cast<std::size_t>(n));
    }
    return in;
  }

  void answer(int fd) {
    const auto request = read_request(fd);
    const auto first_space = request.find(' ');
    const auto path =
        request.substr(first_space + 1, request.find(' ', first_space + 1) - first_space - 1);
    std::string authorization;
    std::istringstream lines(request.substr(0, request.find("\r\n\r\n")));
    for (std::string line; std::getline(lines, line);) {
      if (line.size() > 14 &&
          (line.rfind("Authorization:", 0) == 0 || line.rfind("authorization:", 0) == 0)) {
        authorization = line.substr(14);
        const auto first = authorization.find_first_not_of(' ');
        const auto last = authorization.find_last_not_of(" \r");
        authorization = first == std::string::npos ? std::string{}
                                                   : authorization.substr(first, last - first + 1);
      }
    }
    {
      std::lock_guard lock(mutex_);
      seen_.push_back(path + " " + authorization);
    }
    std::string response;
    if (path.ends_with("/models")) {
      const std::string body = R"({"object":"list","data":[{"id":"captured-model"}]})";
      response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    } else if (request.find(R"("stream":true)") != std::string::npos) {
      const std::string head = R"({"id":"c1","object":"chat.completion.chunk","created":1,)"
                               R"("model":"captured-model","choices":[{"index":0,)";
      response = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 "data: " +
                 head + R"("delta":{"role":"assistant","content":"captured answer"},)" +
                 R"("finish_reason":null}]})" + "\n\ndata: " + head +
                 R"("delta":{},"finish_reason":"stop"}],)" +
                 R"("usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})" +
                 "\n\ndata: [DONE]\n\n";
    } else {
      const std::string body =
          R"({"id":"c1","object":"chat.completion","created":1,"model":"captured-model",)"
          R"("choices":[{"index":0,"message":{"role":"assistant","content":"captured answer"},)"
          R"("finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,)"
          R"("total_tokens":5}})";
      response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    }
    std::string_view rest = response;
    while (!rest.empty()) {
      const auto n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        return;
      }
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::string> seen_;
};

// Sets environment variables for the troupe children this test starts; restores them.
class scoped_env {
public:
  void set(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~scoped_env() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }

private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A marker no log line or file could contain by chance.
std::string marker(const std::string& what) {
  return "sk-" + what + "-" + troupe::new_uuid();
}

// Every byte SQLite keeps for the database in `data_dir`.
std::string database_bytes(const std::filesystem::path& data_dir) {
  std::string all;
  for (const char* name : {"troupe.db", "troupe.db-wal", "troupe.db-journal"}) {
    if (std::filesystem::exists(data_dir / name)) {
      all += read_file(data_dir / name);
    }
  }
  return all;
}

// A `troupe serve` on `dir`/data with `toml` after listen and data_dir.
struct serve_process {
  serve_process(const temp_dir& dir, const std::string& toml)
      : data_dir(dir.path() / "data"), config(dir.path() / "troupe.toml") {
    std::ofstream(config) << "listen = \"127.0.0.1:0\"\ndata_dir = \"" << data_dir.string()
                          << "\"\n"
                          << toml;
    process = std::make_unique<troupe_process>(
        std::vector<std::string>{"serve", "--config", config.string()});
  }
  std::filesystem::path data_dir;
  std::filesystem::path config;
  std::unique_ptr<troupe_process> process;
};

std::string call(std::uint16_t port, std::string_view method, std::string_view target,
                 const std::string& token, std::string_view body = {}) {
  std::string extra = "Authorization: Bearer " + token + "\r\n";
  if (!body.empty()) {
    extra += "Content-Type: application/json\r\n";
  }
  return http_exchange(port, method, target, body, extra);
}

// The admin token a `troupe serve` on `data_dir` wrote at its first start.
std::string admin_token(const std::filesystem::path& data_dir) {
  auto token = read_file(data_dir / "admin.token");
  while (!token.empty() && token.back() == '\n') {
    token.pop_back();
  }
  return token;
}

// Starts `troupe serve` on `dir` and stops it once it listens: the data directory, its
// database and its key file then exist.
void start_and_stop(const temp_dir& dir) {
  serve_process serve(dir, "");
  REQUIRE(serve.process->wait_for_port());
  serve.process->signal(SIGTERM);
  REQUIRE(serve.process->wait_exit() == 0);
}

// What `troupe serve` on `dir` printed when it refused to start (it must end non-zero
// without listening).
std::string refused_start_output(const temp_dir& dir) {
  serve_process serve(dir, "");
  CHECK_FALSE(serve.process->wait_for_port(10s));
  const auto code = serve.process->wait_exit();
  CHECK((code && *code != 0));
  return serve.process->output();
}

} // namespace

TEST_CASE("a verbose trace run logs no key or token and stores no key in plain text",
          "[integration][secrets]") {
  key_capture_server upstream;
  mock_llm_fixture mock;
  const auto api_key = marker("api-key");
  const auto env_key = marker("env-key");
  scoped_env env;
  env.set("TROUPE_CURL_VERBOSE", "1");
  env.set("TROUPE_KEY_SECRETS_TEST", env_key);

  temp_dir dir;
  serve_process serve(dir, "log_level = \"trace\"\n"
                           "[[providers]]\nname = \"declared\"\ntype = \"openai-compatible\"\n"
                           "base_url = \"" +
                               mock.base_url() +
                               "\"\napi_key_env = \"TROUPE_KEY_SECRETS_TEST\"\n"
                               "[[agents]]\nname = \"declared-agent\"\nprovider = \"declared\"\n"
                               "model = \"mock-llm\"\n");
  auto& troupe = *serve.process;
  const auto port = troupe.wait_for_port().value_or(0);
  REQUIRE(port != 0);
  const auto admin = admin_token(serve.data_dir);
  REQUIRE_FALSE(admin.empty());

  // The key file: created at the first start, owner-only.
  struct stat st {};
  REQUIRE(::stat((serve.data_dir / "secret.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_size == 32);

  // A provider whose key is set over the API, and an agent on it.
  const auto provider = call(port, "POST", "/api/v1/providers", admin,
                             R"({"name":"captured","kind":"openai-compatible","base_url":")" +
                                 upstream.base_url() + R"(","api_key":")" + api_key + "\"}");
  REQUIRE(status_of(provider) == 201);
  CHECK_THAT(body_of(provider), Catch::Contains(R"("has_api_key":true)"));
  const auto provider_id = json_field(body_of(provider), "id");
  const auto agent = call(port, "POST", "/api/v1/agents", admin,
                          R"({"name":"captured-agent","provider_id":)" + provider_id +
                              R"(,"main_model":"captured-model","tools":[]})");
  REQUIRE(status_of(agent) == 201);

  // A user and a token of theirs.
  const auto user = call(port, "POST", "/api/v1/users", admin, R"({"name":"ursula"})");
  REQUIRE(status_of(user) == 201);
  const auto token =
      call(port, "POST", "/api/v1/tokens", admin,
           R"({"name":"t","user_id":)" + json_field(body_of(user), "id") + R"(,"scope":"user"})");
  REQUIRE(status_of(token) == 201);
  const auto user_token = json_field(body_of(token), "token");
  REQUIRE_FALSE(user_token.empty());

  // A channel of requests: chat on both providers, whole and streamed, models listed.
  const auto captured = call(port, "POST", "/api/v1/chat", user_token,
                             R"({"agent":"captured-agent","message":"hello through the capture"})");
  REQUIRE(status_of(captured) == 200);
  CHECK_THAT(body_of(captured), Catch::Contains("captured answer"));
  const auto declared = call(port, "POST", "/api/v1/chat", admin,
                             R"({"agent":"declared-agent","message":"hello through the mock"})");
  REQUIRE(status_of(declared) == 200);
  CHECK(json_field(body_of(declared), "status") == "succeeded");
  const auto completion = call(port, "POST", "/v1/chat/completions", user_token,
                               R"({"model":"captured-agent","stream":true,)"
                               R"("messages":[{"role":"user","content":"streamed hello"}]})");
  CHECK(status_of(completion) == 200);
  CHECK_THAT(completion, Catch::Contains("captured answer"));
  const auto models = call(port, "GET", "/api/v1/providers/" + provider_id + "/models", admin);
  CHECK(status_of(models) == 200);
  CHECK_THAT(body_of(models), Catch::Contains("captured-model"));
  for (const auto& r : {provider, call(port, "GET", "/api/v1/providers", admin),
                        call(port, "GET", "/api/v1/providers/" + provider_id, admin)}) {
    CHECK_THAT(r, !Catch::Contains(api_key));
  }

  // The key really went upstream on every call to the captured provider.
  const auto seen = upstream.authorizations();
  REQUIRE(seen.size() >= 3);
  for (const auto& s : seen) {
    CHECK_THAT(s, Catch::EndsWith("Bearer " + api_key));
  }
  CHECK(mock.stats().completion_requests >= 1);

  troupe.signal(SIGTERM);
  CHECK(troupe.wait_exit() == 0);
  const auto& log = troupe.output();
  // curl's verbose trace ran, with the credential headers' values hidden.
  CHECK_THAT(log, Catch::Contains("> POST /v1/chat/completions"));
  CHECK_THAT(log, Catch::Contains("Authorization: [redacted]"));
  for (const auto& secret : {api_key, env_key, admin, user_token}) {
    CHECK(log.find(secret) == std::string::npos);
  }
  // The database holds the key sealed, never as text.
  const auto bytes = database_bytes(serve.data_dir);
  REQUIRE_FALSE(bytes.empty());
  CHECK(bytes.find(api_key) == std::string::npos);
  troupe::storage::connection_options read_only;
  read_only.read_only = true;
  auto db = troupe::storage::connection::open(serve.data_dir / "troupe.db", read_only);
  REQUIRE(db);
  CHECK(db->query_int("SELECT COUNT(*) FROM providers WHERE name = 'captured' AND "
                      "substr(api_key, 1, 3) = 'v1:'")
            .value_or(0) == 1);
}

TEST_CASE("troupe refuses to start when secret.key is readable by others",
          "[integration][secrets]") {
  temp_dir dir;
  start_and_stop(dir);
  const auto key = dir.path() / "data" / "secret.key";
  REQUIRE(::chmod(key.c_str(), 0644) == 0);
  CHECK_THAT(refused_start_output(dir), Catch::Contains("secret.key") &&
                                            Catch::Contains("mode 0644") &&
                                            Catch::Contains("chmod 600"));
}

TEST_CASE("troupe refuses to start when secret.key is damaged and does not replace it",
          "[integration][secrets]") {
  temp_dir dir;
  start_and_stop(dir);
  const auto key = dir.path() / "data" / "secret.key";
  REQUIRE(::truncate(key.c_str(), 16) == 0);
  CHECK_THAT(refused_start_output(dir), Catch::Contains("secret.key") &&
                                            Catch::Contains("is 16 bytes") &&
                                            Catch::Contains("exactly 32 bytes"));
  // The damaged file is left for the admin to restore: a new key would orphan every
  // sealed value.
  CHECK(std::filesystem::file_size(key) == 16);

  std::filesystem::remove(key);
  std::filesystem::create_directory(key);
  CHECK_THAT(refused_start_output(dir),
             Catch::Contains("secret.key") && Catch::Contains("not a regular file"));
}

TEST_CASE("a key an older build stored in plain text is sealed at the next start, once",
          "[integration][secrets]") {
  key_capture_server upstream;
  const auto api_key = marker("legacy-key");
  temp_dir dir;
  start_and_stop(dir);
  const auto data_dir = dir.path() / "data";
  troupe::storage::row_id id = 0;
  {
    // What a build before sealing wrote: the key as the API was given it.
    auto db = troupe::storage::connection::open(data_dir / "troupe.db");
    REQUIRE(db);
    troupe::storage::provider_record p;
    p.name = "legacy";
    p.kind = "openai-compatible";
    p.base_url = upstream.base_url();
    p.api_key = api_key;
    auto inserted = troupe::storage::insert_provider(*db, p);
    REQUIRE(inserted);
    id = *inserted;
  }
  REQUIRE(database_bytes(data_dir).find(api_key) != std::string::npos);
  const auto stored_key = [&] {
    troupe::storage::connection_options read_only;
    read_only.read_only = true;
    auto db = troupe::storage::connection::open(data_dir / "troupe.db", read_only);
    REQUIRE(db);
    auto row = troupe::storage::find_provider(*db, id);
    REQUIRE(row);
    return row->api_key;
  };
  const auto models_path = "/api/v1/providers/" + std::to_string(id) + "/models";

  std::string sealed;
  {
    serve_process serve(dir, "");
    const auto port = serve.process->wait_for_port().value_or(0);
    REQUIRE(port != 0);
    CHECK_THAT(serve.process->output(),
               Catch::Contains("encrypted 1 provider key(s) that were stored in plain text"));
    sealed = stored_key();
    CHECK(sealed.starts_with("v1:"));
    CHECK(database_bytes(data_dir).find(api_key) == std::string::npos);
    // The sealed key still works: it is opened for the request and sent upstream.
    const auto admin = admin_token(data_dir);
    const auto models = call(port, "GET", models_path, admin);
    CHECK(status_of(models) == 200);
    CHECK_THAT(body_of(models), Catch::Contains("captured-model"));
    CHECK_THAT(call(port, "GET", "/api/v1/providers", admin),
               !Catch::Contains(api_key) && !Catch::Contains(sealed));
    serve.process->signal(SIGTERM);
    CHECK(serve.process->wait_exit() == 0);
  }
  {
    // A second start finds nothing to seal and leaves the sealed value as it is.
    serve_process serve(dir, "");
    const auto port = serve.process->wait_for_port().value_or(0);
    REQUIRE(port != 0);
    CHECK_THAT(serve.process->output(), !Catch::Contains("encrypted"));
    CHECK(stored_key() == sealed);
    CHECK(status_of(call(port, "GET", models_path, admin_token(data_dir))) == 200);
    serve.process->signal(SIGTERM);
    CHECK(serve.process->wait_exit() == 0);
  }
  const auto seen = upstream.authorizations();
  REQUIRE(seen.size() == 2);
  for (const auto& s : seen) {
    CHECK_THAT(s, Catch::EndsWith("Bearer " + api_key));
  }
}

TEST_CASE("a config naming a key variable outside the rule does not start",
          "[integration][secrets]") {
  temp_dir dir;
  serve_process serve(dir, "[[providers]]\nname = \"p\"\ntype = \"openai\"\n"
                           "api_key_env = \"HOME\"\n");
  CHECK_FALSE(serve.process->wait_for_port(10s));
  const auto code = serve.process->wait_exit();
  CHECK((code && *code != 0));
  CHECK_THAT(serve.process->output(),
             Catch::Contains("provider 'p': api_key_env: 'HOME' is not allowed") &&
                 Catch::Contains("TROUPE_KEY_"));
}

TEST_CASE("the API refuses an api_key_ref outside the rule with a 400 naming it",
          "[integration][secrets]") {
  api_server s("", "[secrets]\nallowed_env = [\"SECRETS_TEST_LISTED\"]\n");
  REQUIRE(s.port() != 0);
  const auto provider = [&](const std::string& name, const std::string& ref) {
    return s.call("POST", "/api/v1/providers", s.admin(),
                  R"({"name":")" + name + R"(","kind":"openai","api_key_ref":")" + ref + "\"}");
  };
  const auto home = provider("home", "HOME");
  CHECK(status_of(home) == 400);
  CHECK_THAT(body_of(home), Catch::Contains("api_key_ref: 'HOME' is not allowed") &&
                                Catch::Contains("TROUPE_KEY_") && Catch::Contains("allowed_env"));
  CHECK(status_of(provider("aws", "AWS_SECRET_ACCESS_KEY")) == 400);
  CHECK(status_of(provider("prefixed", "TROUPE_KEY_X")) == 201);
  CHECK(status_of(provider("builtin", "OPENAI_API_KEY")) == 201);
  const auto listed = provider("listed", "SECRETS_TEST_LISTED");
  REQUIRE(status_of(listed) == 201);
  const auto id = json_field(body_of(listed), "id");
  const auto patched = s.call("PATCH", "/api/v1/providers/" + id, s.admin(),
                              R"({"api_key_ref":"AWS_SECRET_ACCESS_KEY"})");
  CHECK(status_of(patched) == 400);
  CHECK_THAT(body_of(s.call("GET", "/api/v1/providers/" + id, s.admin())),
             Catch::Contains(R"("api_key_ref":"SECRETS_TEST_LISTED")"));
}
