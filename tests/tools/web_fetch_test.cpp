// web_fetch against a local web server (issue 18): a page's readable text, caps, content
// types, and the private-address rule.

#include <catch2/catch.hpp>

#include "support/origin_server.hpp"
#include "tools/tool_harness.hpp"
#include "troupe/tools/html_text.hpp"
#include "troupe/tools/web_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const tool> fetcher(bool allow_private, std::size_t max_chars = 20'000,
                                    std::size_t max_bytes = 2 * 1024 * 1024) {
  auto options = std::make_shared<web_tool_options>();
  options->web.fetch_allow_private = allow_private;
  options->web.fetch_max_chars = max_chars;
  options->web.fetch_max_bytes = max_bytes;
  options->web.fetch_timeout = 5s;
  return make_web_fetch_tool(options);
}

std::string url_args(const std::string& url) {
  return R"({"url":")" + url + R"("})";
}

} // namespace

TEST_CASE("html_to_text keeps headings, paragraphs, lists and link text, and drops scripts "
          "and styles",
          "[tools][web_fetch]") {
  const auto page = html_to_text(R"(<html><head><title> A  &amp; B </title>
      <script>alert("x")</script><style>p{}</style></head><body>
      <h2>Head</h2><p>Some <b>bold</b> and <a href="/x">linked</a> text &lt;3 &#x263A; &eacute;</p>
      <ul><li>one</li><li>two</li></ul><template><p>hidden</p></template>
      <pre>a   b
 c</pre><p>end<br>next</p></body></html>)");
  CHECK(page.title == "A & B");
  CHECK(page.text == "## Head\n\nSome bold and linked text <3 ☺ é\n\n- one\n\n- two\n\na   b\n "
                     "c\n\nend\nnext");
  CHECK(html_to_text("").text.empty());
  // Broken markup still gives its text.
  CHECK(html_to_text("<p>unclosed <b>bold <i>mixed</p> tail").text ==
        "unclosed bold mixed\n\ntail");
}

TEST_CASE("web_fetch returns a local page's readable text and title",
          "[tools][web_fetch][integration]") {
  origin_server server;
  auto r = call_tool(*fetcher(true), url_args(server.origin() + "/page"));
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("title":"The Test & Page")"));
  CHECK_THAT(r.content, Catch::Contains(R"("content_type":"text/html")"));
  CHECK_THAT(r.content, Catch::Contains("# Main heading\\n\\nFirst paragraph with a link's text "
                                        "and <escaped> élève ☺."));
  CHECK_THAT(r.content, Catch::Contains("- one\\n\\n- two\\n\\n## Second heading"));
  CHECK_THAT(r.content, Catch::Contains("keep   these\\n  spaces"));
  CHECK_THAT(r.content, Catch::Contains("Last\\nline"));
  CHECK_THAT(r.content, !Catch::Contains("script text") && !Catch::Contains("color: red") &&
                            !Catch::Contains("noscript text"));
  CHECK_THAT(r.content, Catch::Contains(R"("truncated":false)"));
}

TEST_CASE("web_fetch decodes the charset the server names", "[tools][web_fetch][integration]") {
  origin_server server;
  auto r = call_tool(*fetcher(true), url_args(server.origin() + "/latin1"));
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("text":"café")"));
}

TEST_CASE("web_fetch returns JSON and text bodies as they are and refuses other types",
          "[tools][web_fetch][integration]") {
  origin_server server;
  auto json = call_tool(*fetcher(true), url_args(server.origin() + "/data.json"));
  REQUIRE(json.ok);
  CHECK_THAT(json.content, Catch::Contains(R"("text":"{\"items\":[1,2,3],\"name\":\"data\"}")"));
  auto pdf = call_tool(*fetcher(true), url_args(server.origin() + "/file.pdf"));
  CHECK_FALSE(pdf.ok);
  CHECK_THAT(pdf.content, Catch::Contains("is application/pdf: web_fetch reads HTML, text and "
                                          "JSON only"));
  auto missing = call_tool(*fetcher(true), url_args(server.origin() + "/status/404"));
  CHECK(missing.failure_kind == "not_found");
  auto ftp = call_tool(*fetcher(true), url_args("ftp://example.org/x"));
  CHECK(ftp.failure_kind == "invalid_arguments");
}

TEST_CASE("web_fetch cuts long text and long bodies and says so",
          "[tools][web_fetch][integration]") {
  origin_server server;
  auto short_text = call_tool(*fetcher(true, 100), url_args(server.origin() + "/big"));
  REQUIRE(short_text.ok);
  CHECK_THAT(short_text.content, Catch::Contains("\"text\":\"" + std::string(100, 'x') + "\""));
  CHECK_THAT(short_text.content,
             Catch::Contains(R"("truncated":true)") && Catch::Contains("cut: 100 of 5000 bytes"));
  auto few_bytes = call_tool(*fetcher(true, 20'000, 1024), url_args(server.origin() + "/big"));
  REQUIRE(few_bytes.ok);
  CHECK_THAT(few_bytes.content, Catch::Contains("only the first 1024 bytes of the page were read"));
}

TEST_CASE("web_fetch of a private address is refused unless allowed",
          "[tools][web_fetch][integration]") {
  origin_server server;
  for (const auto& url :
       {server.origin() + "/page", "http://localhost:" + std::to_string(server.port()) + "/page",
        std::string("http://192.168.1.1/"), std::string("http://[fe80::1]/")}) {
    INFO(url);
    auto r = call_tool(*fetcher(false), url_args(url));
    CHECK_FALSE(r.ok);
    CHECK(r.failure_kind == "policy_blocked");
    CHECK_THAT(r.content, Catch::Contains("loopback, private or link-local"));
  }
  CHECK(server.calls().count("request") == 0);
  // With private addresses allowed, a redirect is followed (each hop resolved and checked
  // the same way).
  auto hop = call_tool(*fetcher(true), url_args(server.origin() + "/redirect"));
  REQUIRE(hop.ok);
  CHECK_THAT(hop.content, Catch::Contains("/echo/after-redirect"));
}
