#include "support/origin_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "troupe/runtime/json_writer.hpp"

namespace troupe::test {

using net::http_method;
using net::http_response;
using net::request_context;

namespace {

using log_ptr = std::shared_ptr<call_log>;

constexpr std::string_view page_html = R"(<!DOCTYPE html>
<html><head><title>The  Test &amp; Page</title>
<style>body { color: red; }</style>
<script>var secret = "script text must not appear";</script>
</head>
<body>
<h1>Main heading</h1>
<p>First paragraph with <a href="/other">a link's text</a> and &lt;escaped&gt; &eacute;l&egrave;ve &#x263A;.</p>
<noscript>noscript text</noscript>
<ul><li>one</li><li>two</li></ul>
<h2>Second   heading</h2>
<pre>keep   these
  spaces</pre>
<div>Last<br>line</div>
</body></html>)";

void record(const log_ptr& log, const net::http_request& r, const http_response& answer) {
  log->add({"request", r.headers, r.target + "\n" + r.body, answer.status, answer.body,
            std::chrono::steady_clock::now()});
}

http_response echo(const request_context& ctx) {
  const auto& r = ctx.request();
  json_writer w;
  w.begin_object().key("method").value(net::to_string(r.method)).key("target").value(r.target);
  w.key("path").value(r.path).key("tail").value(ctx.param("tail"));
  w.key("headers").begin_object();
  for (const auto& h : r.headers) {
    w.key(h.name).value(h.value);
  }
  w.end_object().key("body").value(r.body).end_object();
  return http_response::json(200, std::move(w).str());
}

asio::awaitable<http_response> answer(request_context& ctx, log_ptr log, std::string route) {
  const auto& r = ctx.request();
  http_response out;
  if (route == "echo") {
    out = echo(ctx);
  } else if (route == "big") {
    out = http_response::text(200, std::string(5000, 'x'));
  } else if (route == "slow") {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::seconds(3));
    (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    out = http_response::text(200, "finally");
  } else if (route == "status") {
    const auto code = static_cast<unsigned>(std::stoul(std::string(ctx.param("code"))));
    out = http_response::json(code, fmt::format(R"({{"status":{}}})", code));
  } else if (route == "redirect") {
    out = http_response::text(302, "moved");
    out.headers.push_back({"Location", "/echo/after-redirect"});
  } else if (route == "redirect-to") {
    out = http_response::text(302, "moved");
    out.headers.push_back({"Location", r.query_param("url")});
  } else if (route == "page") {
    out = http_response::text(200, std::string(page_html), "text/html; charset=utf-8");
  } else if (route == "latin1") {
    // "café" in ISO-8859-1: é is the single byte 0xE9.
    out = http_response::text(200, "<html><body><p>caf\xE9</p></body></html>",
                              "text/html; charset=ISO-8859-1");
  } else if (route == "json") {
    out = http_response::json(200, R"({"items":[1,2,3],"name":"data"})");
  } else if (route == "pdf") {
    out = http_response::text(200, "%PDF-1.4 binary", "application/pdf");
  }
  record(log, r, out);
  co_return out;
}

} // namespace

origin_server::origin_server() : log_(std::make_shared<call_log>()) {
  net::router routes;
  const auto add = [&](http_method m, std::string_view pattern, std::string route) {
    routes.add(m, pattern,
               [log = log_, route](request_context& ctx) { return answer(ctx, log, route); });
  };
  for (auto m : {http_method::get, http_method::post, http_method::put, http_method::patch,
                 http_method::del}) {
    add(m, "/echo/{tail}", "echo");
  }
  add(http_method::get, "/big", "big");
  add(http_method::get, "/slow", "slow");
  add(http_method::get, "/status/{code}", "status");
  add(http_method::get, "/redirect", "redirect");
  add(http_method::post, "/redirect", "redirect");
  add(http_method::get, "/redirect-to", "redirect-to");
  add(http_method::get, "/page", "page");
  add(http_method::get, "/latin1", "latin1");
  add(http_method::get, "/data.json", "json");
  add(http_method::get, "/file.pdf", "pdf");
  server_ = std::make_unique<loopback_server>(std::move(routes), "origin");
}

origin_server::~origin_server() {
  server_.reset();
}

std::string origin_server::origin() const {
  return server_->origin();
}

std::uint16_t origin_server::port() const noexcept {
  return server_->port();
}

const call_log& origin_server::calls() const noexcept {
  return *log_;
}

} // namespace troupe::test
