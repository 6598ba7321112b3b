#include "troupe/bench/troupe_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include "troupe/bench/loopback.hpp"

extern char** environ;

namespace troupe::bench {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view provider_name = "troupe-bench-mock";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// A TOML basic string.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "\"";
}

std::string toml_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += (i ? ", " : "") + toml_string(items[i]);
  }
  return out + "]";
}

asio::awaitable<expected<net::http_client_response>> fetch_on(net::http_client* client,
                                                              net::http_client_request request) {
  auto pending = client->fetch(std::move(request));
  co_return co_await std::move(pending);
}

net::http_client_request api_request(const std::string& origin, const net::http_header& auth,
                                     net::http_method method, std::string path,
                                     std::string body = {}) {
  net::http_client_request r;
  r.method = method;
  r.url = origin + path;
  r.body = std::move(body);
  r.headers = {auth, {"Content-Type", "application/json"}};
  r.deadlines.total = 10s;
  return r;
}

/// The id of the record named `name` in a list answer, or nullopt.
std::optional<json::value> id_named(const std::string& list_body, std::string_view name) {
  boost::system::error_code ec;
  auto v = json::parse(list_body, ec);
  if (ec || !v.is_object() || !v.as_object().contains("data")) {
    return std::nullopt;
  }
  for (const auto& item : v.as_object().at("data").as_array()) {
    const auto& o = item.as_object();
    if (o.contains("name") && o.at("name").is_string() && o.at("name").as_string() == name) {
      return o.at("id");
    }
  }
  return std::nullopt;
}

/// Creates the record (POST) or, when one with that name exists, updates it (PATCH).
expected<json::value> upsert(const std::string& origin, const net::http_header& auth,
                             const std::string& collection, std::string_view name,
                             const json::object& body) {
  auto listed =
      fetch_blocking(api_request(origin, auth, net::http_method::get, collection + "?limit=200"));
  if (!listed) {
    return tl::unexpected(listed.error());
  }
  if (listed->status != 200) {
    return fail(errc::unavailable,
                fmt::format("GET {} answered {}: {}", collection, listed->status, listed->body));
  }
  const auto existing = id_named(listed->body, name);
  const auto path = existing
                        ? fmt::format("{}/{}", collection,
                                      existing->is_string() ? std::string(existing->as_string())
                                                            : json::serialize(*existing))
                        : collection;
  auto written = fetch_blocking(
      api_request(origin, auth, existing ? net::http_method::patch : net::http_method::post, path,
                  json::serialize(body)));
  if (!written) {
    return tl::unexpected(written.error());
  }
  if (written->status != 200 && written->status != 201) {
    return fail(errc::unavailable, fmt::format("{} {} answered {}: {}", existing ? "PATCH" : "POST",
                                               path, written->status, written->body));
  }
  boost::system::error_code ec;
  auto v = json::parse(written->body, ec);
  if (ec || !v.is_object() || !v.as_object().contains("id")) {
    return fail(errc::parse_error, fmt::format("{} answered without an id", path));
  }
  return v.as_object().at("id");
}

expected<void> provision(const std::string& origin, const net::http_header& auth,
                         const troupe_setup& setup) {
  json::object provider;
  provider["name"] = provider_name;
  provider["kind"] = "openai-compatible";
  provider["base_url"] = setup.provider_base_url;
  provider["api_key"] = "mock-llm-needs-no-key";
  auto provider_id = upsert(origin, auth, "/api/v1/providers", provider_name, provider);
  if (!provider_id) {
    return tl::unexpected(provider_id.error());
  }
  for (const auto& a : setup.agents) {
    json::object agent;
    agent["name"] = a.name;
    agent["main_model"] = setup.model;
    agent["provider_id"] = *provider_id;
    json::array tools;
    for (const auto& t : a.tools) {
      tools.emplace_back(t);
    }
    agent["tools"] = std::move(tools);
    agent["limits"] = json::object{{"max_rounds", a.max_rounds}};
    if (auto done = upsert(origin, auth, "/api/v1/agents", a.name, agent); !done) {
      return tl::unexpected(done.error());
    }
  }
  return {};
}

/// The environment for the child: ours without TROUPE_* (they would override the
/// generated config) and without OPENAI_API_KEY (not needed: the provider is declared).
std::vector<std::string> child_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("TROUPE_") || entry.starts_with("OPENAI_API_KEY=")) {
      continue;
    }
    out.emplace_back(entry);
  }
  return out;
}

} // namespace

expected<net::http_client_response> fetch_blocking(net::http_client_request request) {
  asio::io_context io(1);
  net::http_client client(io.get_executor());
  auto done = asio::co_spawn(io, fetch_on(&client, std::move(request)), asio::use_future);
  io.run();
  return done.get();
}

std::string troupe_config_text(const troupe_setup& setup, const std::filesystem::path& data_dir) {
  // Section -> key -> value; the bench's defaults first, the scenario's settings over them.
  std::map<std::string, std::map<std::string, std::string>> sections;
  sections[""]["listen"] = toml_string("127.0.0.1:0");
  sections[""]["data_dir"] = toml_string(data_dir.string());
  sections[""]["log_level"] = toml_string("info");
  // The per-token bucket (default 20/s) would turn the load into 429s: out of the way.
  sections["api"]["rate_per_second"] = "1000000000.0";
  sections["api"]["rate_burst"] = "1000000000.0";
  sections["server"]["shutdown_timeout_ms"] = "3000";
  for (const auto& [key, value] : setup.settings) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) {
      sections[""][key] = value;
    } else {
      sections[key.substr(0, dot)][key.substr(dot + 1)] = value;
    }
  }
  std::string out = "# Generated by troupe bench for one run.\n";
  for (const auto& [key, value] : sections[""]) {
    out += fmt::format("{} = {}\n", key, value);
  }
  for (const auto& [section, keys] : sections) {
    if (section.empty()) {
      continue;
    }
    out += fmt::format("\n[{}]\n", section);
    for (const auto& [key, value] : keys) {
      out += fmt::format("{} = {}\n", key, value);
    }
  }
  out += fmt::format("\n[[providers]]\nname = {}\ntype = \"openai-compatible\"\nbase_url = {}\n"
                     "api_key = \"mock-llm-needs-no-key\"\nmodels = {}\n",
                     toml_string(provider_name), toml_string(setup.provider_base_url),
                     toml_array({setup.model}));
  for (const auto& a : setup.agents) {
    out += fmt::format("\n[[agents]]\nname = {}\nprovider = {}\nmodel = {}\ntools = {}\n"
                       "max_rounds = {}\n",
                       toml_string(a.name), toml_string(provider_name), toml_string(setup.model),
                       toml_array(a.tools), a.max_rounds);
  }
  return out;
}

expected<std::unique_ptr<troupe_server>> troupe_server::spawn(const troupe_setup& setup,
                                                              const spawn_options& options) {
  std::unique_ptr<troupe_server> self(new troupe_server);
  self->spawned_ = true;
  self->keep_dir_ = options.keep_dir;
  std::error_code ec;
  self->binary_ = options.binary.empty()
                      ? std::filesystem::read_symlink("/proc/self/exe", ec).string()
                      : options.binary;
  if (ec || self->binary_.empty()) {
    return fail(errc::io_error, "cannot find this executable (/proc/self/exe)");
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "troupe-bench-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    return fail(errc::io_error, "cannot create a temporary directory for troupe");
  }
  self->dir_ = pattern;
  self->data_dir_ = self->dir_ / "data";
  self->log_path_ = self->dir_ / "troupe.log";
  const auto config_path = self->dir_ / "troupe.toml";
  self->config_text_ = troupe_config_text(setup, self->data_dir_);
  {
    std::ofstream config(config_path, std::ios::binary | std::ios::trunc);
    config << self->config_text_;
    if (!config) {
      return fail(errc::io_error, fmt::format("cannot write {}", config_path.string()));
    }
  }
  self->config_path_ = config_path;
  self->start_timeout_ = options.start_timeout;
  if (auto launched = self->launch(); !launched) {
    return tl::unexpected(launched.error());
  }
  return self;
}

expected<void> troupe_server::restart() {
  if (!spawned_) {
    return fail(errc::invalid_argument, "only a troupe started by troupe bench can be restarted");
  }
  if (const int status = stop(std::chrono::seconds(10)); status != 0) {
    return fail(errc::unavailable,
                fmt::format("troupe exited with status {} when stopped for a restart:\n{}", status,
                            log_tail()));
  }
  return launch();
}

expected<void> troupe_server::launch() {
  stopped_ = false;
  // A restart keeps the earlier log beside the new one (and the new one alone has a
  // "listening on" line to find).
  if (std::error_code ec; std::filesystem::exists(log_path_, ec)) {
    std::error_code ignored;
    std::filesystem::rename(log_path_, log_path_.string() + ".previous", ignored);
  }
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return fail(errc::io_error, fmt::format("cannot create {}", log_path_.string()));
  }
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the mock-llm thread may hold a malloc lock).
  std::vector<std::string> args = {binary_, "serve", "--config", config_path_.string()};
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  auto env_strings = child_environment();
  std::vector<char*> envp;
  for (auto& e : env_strings) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return fail(errc::io_error, "fork failed");
  }
  if (pid == 0) {
    // Dies with the bench, whatever way the bench ends.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) {
      ::_exit(126);
    }
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(log_fd);
  pid_ = pid;

  static const std::regex listening(R"(listening on http://(\S+):(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + start_timeout_;
  for (;;) {
    const auto log = read_text(log_path_);
    std::smatch m;
    if (std::regex_search(log, m, listening)) {
      origin_ = fmt::format("http://{}:{}", m[1].str(), m[2].str());
      break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      stopped_ = true;
      return fail(errc::unavailable,
                  fmt::format("troupe serve exited before listening:\n{}", log_tail()));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(errc::timeout, fmt::format("troupe serve did not listen within {} ms:\n{}",
                                             start_timeout_.count(), log_tail()));
    }
    std::this_thread::sleep_for(20ms);
  }
  auto token = read_text(data_dir_ / "admin.token");
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  if (token.empty()) {
    return fail(errc::unavailable, fmt::format("troupe wrote no admin token to {}",
                                               (data_dir_ / "admin.token").string()));
  }
  token_ = std::move(token);
  auto me =
      fetch_blocking(api_request(origin_, authorization(), net::http_method::get, "/api/v1/me"));
  if (!me || me->status != 200) {
    return fail(errc::unavailable,
                fmt::format("troupe at {} does not accept its admin token ({})", origin_,
                            me ? fmt::format("status {}", me->status) : me.error().message));
  }
  return {};
}

expected<std::unique_ptr<troupe_server>> troupe_server::attach(std::string_view url,
                                                               std::string token,
                                                               const troupe_setup& setup, pid_t pid,
                                                               std::filesystem::path data_dir) {
  auto checked = check_loopback_url(url);
  if (!checked) {
    return tl::unexpected(checked.error());
  }
  if (token.empty()) {
    return fail(errc::invalid_argument, "--troupe needs --token (an admin token of that server)");
  }
  std::unique_ptr<troupe_server> self(new troupe_server);
  self->origin_ = checked->origin;
  self->token_ = std::move(token);
  self->pid_ = pid;
  self->data_dir_ = std::move(data_dir);
  if (auto done = provision(self->origin_, self->authorization(), setup); !done) {
    return fail(done.error().code,
                fmt::format("setting up troupe at {}: {}", self->origin_, done.error().message));
  }
  return self;
}

troupe_server::~troupe_server() {
  stop(5s);
  if (spawned_ && !keep_dir_ && !dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

net::http_header troupe_server::authorization() const {
  return {"Authorization", "Bearer " + token_};
}

int troupe_server::stop(std::chrono::milliseconds grace) {
  if (!spawned_ || stopped_ || pid_ <= 0) {
    return 0;
  }
  stopped_ = true;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  for (;;) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string troupe_server::log_tail(std::size_t max_bytes) const {
  if (log_path_.empty()) {
    return {};
  }
  auto log = read_text(log_path_);
  return log.size() > max_bytes ? log.substr(log.size() - max_bytes) : log;
}

json::object troupe_server::describe() const {
  json::object o;
  o["url"] = origin_;
  o["kind"] =
      spawned_ ? "troupe serve started by troupe bench (child process)" : "given by --troupe";
  if (pid_ > 0) {
    o["pid"] = pid_;
  }
  if (!data_dir_.empty()) {
    o["data_dir"] = data_dir_.string();
  }
  if (spawned_) {
    o["binary"] = binary_;
    o["config"] = config_text_;
  }
  return o;
}

} // namespace troupe::bench
