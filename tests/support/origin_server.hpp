#pragma once

// A web server on 127.0.0.1 for tests of tools that fetch (custom HTTP tools, web_fetch):
// it records every request and answers from fixed routes.
//
//   ANY /echo/{tail}    200 JSON {"method", "target", "path", "tail", "headers": {…}, "body"}
//   GET /big            200, 5,000 bytes of text
//   GET /slow           200 after 3 s (a timer: the server is slow, the test waits for it)
//   GET /status/{code}  that status, JSON {"status": code}
//   GET /redirect       302 to /echo/after-redirect
//   GET /redirect-to?url=…  302 to that URL
//   GET /page           an HTML page (title, a script, a style, headings, a list, a link,
//                       entities, a <pre>)
//   GET /latin1         an HTML page in ISO-8859-1, said in its Content-Type
//   GET /data.json      200 application/json
//   GET /file.pdf       200 application/pdf

#include <memory>
#include <string>

#include "support/fake_platform.hpp"

namespace troupe::test {

class origin_server {
public:
  origin_server();
  ~origin_server();
  origin_server(const origin_server&) = delete;
  origin_server& operator=(const origin_server&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string origin() const;
  std::uint16_t port() const noexcept;
  /// Every request, as method "request" (body: target, a newline, the body).
  const call_log& calls() const noexcept;

private:
  std::shared_ptr<call_log> log_;
  std::unique_ptr<loopback_server> server_;
};

} // namespace troupe::test
