#include "scenario_support.hpp"

#include <boost/asio/post.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <fmt/format.h>

namespace troupe::bench::detail {

namespace asio = boost::asio;
namespace json = boost::json;

local_mock::local_mock(mock::mock_llm_options options) {
  server_ = std::make_unique<mock::mock_llm_server>(io_, std::move(options));
}

local_mock::~local_mock() {
  if (thread_.joinable()) {
    asio::post(io_,
               [this] { server_->stop(std::chrono::milliseconds(200), [this] { io_.stop(); }); });
    thread_.join();
  }
}

expected<std::string> local_mock::start() {
  auto bound = server_->listen({"127.0.0.1", 0});
  if (!bound) {
    return tl::unexpected(bound.error());
  }
  server_->start();
  thread_ = std::thread([this] { io_.run(); });
  return fmt::format("http://127.0.0.1:{}", bound->port);
}

mock::mock_llm_stats local_mock::stats() const {
  return server_->stats();
}

net::http_client_request make_request(const request_template& t,
                                      std::chrono::milliseconds timeout) {
  net::http_client_request r;
  r.method = t.method;
  r.url = t.url;
  r.body = t.body;
  r.headers = t.headers;
  r.deadlines.connect = timeout;
  r.deadlines.first_byte = timeout;
  r.deadlines.idle = timeout;
  r.deadlines.total = timeout;
  return r;
}

asio::awaitable<std::optional<std::string>> send_request(net::http_client& client,
                                                         const request_template* t,
                                                         std::chrono::milliseconds timeout,
                                                         std::string* body) {
  auto pending = client.fetch(make_request(*t, timeout));
  auto r = co_await std::move(pending);
  if (!r) {
    co_return error_kind(r.error());
  }
  if (body) {
    *body = std::move(r->body);
  }
  if (r->status < 200 || r->status > 299) {
    co_return fmt::format("http_{}", r->status);
  }
  co_return std::nullopt;
}

std::chrono::milliseconds default_warmup(std::chrono::milliseconds duration) {
  return std::min<std::chrono::milliseconds>(duration / 10, std::chrono::milliseconds(500));
}

void add_errors(bench_report& report, const load_result& r) {
  report.add("errors", static_cast<double>(r.failed));
  for (const auto& [kind, n] : r.errors_by_kind) {
    report.add("errors." + kind, static_cast<double>(n));
  }
}

double us(std::uint64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

expected<std::unique_ptr<troupe_server>> open_troupe(const scenario_options& o,
                                                     const troupe_setup& base) {
  auto setup = base;
  for (const auto& kv : o.troupe_settings) {
    const auto eq = kv.find('=');
    setup.settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (o.troupe_url.empty()) {
    spawn_options so;
    so.keep_dir = o.keep_troupe_dir;
    return troupe_server::spawn(setup, so);
  }
  return troupe_server::attach(o.troupe_url, o.troupe_token, setup, o.troupe_pid,
                               o.troupe_data_dir);
}

std::string json_text(std::string_view s) {
  return json::serialize(json::string(s));
}

/// POST /api/v1/chat (or another chat route) on troupe, with its token.
request_template troupe_post(const troupe_server& troupe, std::string path) {
  request_template t;
  t.url = troupe.origin() + path;
  t.headers = {troupe.authorization(), {"Content-Type", "application/json"}};
  return t;
}

std::optional<json::object> parse_object(std::string_view text) {
  boost::system::error_code ec;
  auto v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return std::nullopt;
  }
  return std::move(v.as_object());
}

std::string string_field(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
} // namespace troupe::bench::detail
