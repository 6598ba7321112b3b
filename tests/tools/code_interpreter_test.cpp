#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/troupe_process.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/tools/builtin_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
namespace asio = boost::asio;

namespace {

tool_result interpret(const std::string& args, const std::filesystem::path& ws,
                      code_interpreter_options options = {}) {
  static const sandbox_runner sandbox;
  auto tool = make_code_interpreter_tool(std::move(options));
  asio::io_context io;
  tool_result result;
  asio::co_spawn(io, tool->invoke(args, {ws, "run-1", "call-1", &sandbox}),
                 [&result](std::exception_ptr ep, tool_result r) {
                   if (ep) {
                     std::rethrow_exception(ep);
                   }
                   result = std::move(r);
                 });
  io.run();
  return result;
}

std::string code_args(std::string_view language, std::string_view code) {
  json_writer w;
  w.begin_object().key("language").value(language).key("code").value(code).end_object();
  return std::move(w).str();
}

} // namespace

TEST_CASE("python code runs from a real file in the workspace", "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  auto r = interpret(code_args("python", "import sys\nprint('hello', 6*7)\nprint(sys.argv[0])"),
                     ws.path());
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("stdout":"hello 42\nexec_)"));
  CHECK_THAT(r.content, Catch::Contains(R"("exit_code":0)"));
  CHECK_THAT(r.content, Catch::Contains(R"("sandboxed":true)"));
  CHECK_THAT(r.content, Catch::Contains(R"("language":"python","file":"exec_)"));
  bool code_file_exists = false;
  for (const auto& e : std::filesystem::directory_iterator(ws.path())) {
    code_file_exists |=
        e.path().filename().string().rfind("exec_", 0) == 0 && e.path().extension() == ".py";
  }
  CHECK(code_file_exists);
}

TEST_CASE("javascript and bash run too", "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  auto js = interpret(code_args("javascript", "console.log([1,2,3].map(x => x * 2).join(','))"),
                      ws.path());
  CHECK(js.ok);
  CHECK_THAT(js.content, Catch::Contains(R"("stdout":"2,4,6\n")"));
  auto sh = interpret(code_args("bash", "echo $((6 * 7)); exit 4"), ws.path());
  CHECK_FALSE(sh.ok);
  CHECK_THAT(sh.content, Catch::Contains(R"("exit_code":4)"));
  CHECK(sh.failure_kind == "tool_error");
}

TEST_CASE("a CSV goes in and grouped totals come out as CSV and PNG attachments",
          "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  const std::string csv = "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\nsouth,2\n";
  const std::string code = R"(import pandas as pd
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
df = pd.read_csv('sales.csv')
totals = df.groupby('region', as_index=False)['amount'].sum()
totals.to_csv('totals.csv', index=False)
totals.plot.bar(x='region', y='amount')
plt.savefig('/work/totals.png')
print(totals.to_string(index=False))
print('Saved chart to /work/totals.png')
)";
  json_writer w;
  w.begin_object().key("language").value("python").key("code").value(code);
  w.key("files").begin_array().begin_object().key("path").value("sales.csv");
  w.key("content").value(base64_encode(csv)).key("encoding").value("base64").end_object();
  w.end_array().end_object();
  auto r = interpret(w.str(), ws.path());
  INFO(r.content);
  REQUIRE(r.ok);
  REQUIRE(r.artifacts.size() == 2);
  CHECK(r.artifacts[0].path == "totals.png");
  CHECK(r.artifacts[0].mime == "image/png");
  CHECK(r.artifacts[1].path == "totals.csv");
  CHECK(r.artifacts[1].mime == "text/csv");
  std::ifstream in(ws.path() / "totals.csv");
  std::string totals((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(totals == "region,amount\neast,1\nnorth,17\nsouth,7\n");
  // The input is an input, not an output.
  CHECK_THAT(r.content, !Catch::Contains(R"("path":"sales.csv")"));
}

TEST_CASE("a missing runtime says which binary and how to install it",
          "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  code_interpreter_options options;
  options.python = "/usr/bin/python-not-here";
  auto r = interpret(code_args("python", "print(1)"), ws.path(), options);
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.content, Catch::Contains("/usr/bin/python-not-here does not exist"));
  CHECK_THAT(r.content, Catch::Contains("apt-get install python3"));
}

TEST_CASE("code past its timeout is killed and reported", "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  auto r =
      interpret(R"({"language":"python","code":"while True: pass","timeout_ms":500})", ws.path());
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "timeout");
  CHECK_THAT(r.content, Catch::Contains(R"("timed_out":true)"));
}

TEST_CASE("bad code interpreter arguments name the field", "[tools][code_interpreter]") {
  troupe::test::temp_dir ws;
  CHECK_THAT(interpret(R"({"language":"cobol","code":"x"})", ws.path()).content,
             Catch::Contains("arguments.language"));
  CHECK_THAT(interpret(R"({"language":"python","code":"x","memory_mb":8})", ws.path()).content,
             Catch::Contains("arguments.memory_mb"));
  CHECK_THAT(
      interpret(R"({"language":"python","code":"x","timeout_ms":999999})", ws.path()).content,
      Catch::Contains("arguments.timeout_ms"));
  CHECK_THAT(interpret(R"({"language":"python","code":"x","files":[{"path":"../x","content":""}]})",
                       ws.path())
                 .content,
             Catch::Contains("outside the workspace"));
  CHECK_THAT(
      interpret(
          R"({"language":"python","code":"x","files":[{"path":"a","content":"","encoding":"rot13"}]})",
          ws.path())
          .content,
      Catch::Contains("arguments.files[0].encoding"));
  CHECK_THAT(interpret("{not json", ws.path()).content, Catch::Contains("not valid JSON"));
}
