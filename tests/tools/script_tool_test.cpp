// Custom script tools in the real sandbox (issue 18): python, javascript and bash read the
// arguments as JSON on stdin; JSON on stdout comes back as JSON, other output as text; a
// failing script reports its exit code and stderr; the timeout kills it.

#include <fstream>

#include <catch2/catch.hpp>

#include "support/troupe_process.hpp"
#include "tools/tool_harness.hpp"
#include "troupe/tools/custom_tools.hpp"

using namespace troupe;
using namespace troupe::tools;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view text_params =
    R"({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]})";

std::shared_ptr<const tool> script(script_language language, std::string code,
                                   std::chrono::seconds timeout = 20s) {
  custom_tool_settings t;
  t.name = "words";
  t.kind = custom_tool_kind::script;
  t.language = language;
  t.code = std::move(code);
  t.parameters = std::string(text_params);
  t.timeout = timeout;
  auto made = make_custom_tool(std::move(t), nullptr);
  REQUIRE(made);
  return *made;
}

const sandbox_runner& sandbox() {
  static const sandbox_runner runner;
  return runner;
}

} // namespace

TEST_CASE("a python script tool reads its arguments on stdin and answers JSON",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool = script(script_language::python,
                     "import json, sys\n"
                     "args = json.load(sys.stdin)\n"
                     "print(json.dumps({'words': len(args['text'].split()), 'first': "
                     "args['text'].split()[0]}))\n");
  auto r = call_tool(*tool, R"({"text":"one two three"})", ws.path(), &sandbox());
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("result":{"words":3,"first":"one"})"));
  CHECK_THAT(r.content, Catch::Contains(R"("sandboxed":true)"));
}

TEST_CASE("a script tool that is a new conversation's first call makes its workspace",
          "[tools][script_tool][sandbox]") {
  temp_dir root;
  const auto ws = root.path() / "workspaces" / "new-conversation";
  auto tool = script(script_language::bash, "cat > seen.json; echo made");
  auto r = call_tool(*tool, R"({"text":"first"})", ws, &sandbox());
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("result":"made")"));
  std::ifstream seen(ws / "seen.json");
  std::string text((std::istreambuf_iterator<char>(seen)), std::istreambuf_iterator<char>());
  CHECK(text == R"({"text":"first"})");
}

TEST_CASE("a javascript script tool reads its arguments on stdin",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool = script(script_language::javascript,
                     "let s='';process.stdin.on('data',d=>s+=d);process.stdin.on('end',()=>{"
                     "const a=JSON.parse(s);console.log(JSON.stringify({upper:a.text.toUpperCase()"
                     "}));});");
  auto r = call_tool(*tool, R"({"text":"shout"})", ws.path(), &sandbox());
  INFO(r.content);
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("result":{"upper":"SHOUT"})"));
}

TEST_CASE("a bash script tool reads its arguments on stdin and answers text",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool = script(script_language::bash, "read -r line; echo \"got: ${#line} bytes\"");
  auto r = call_tool(*tool, R"({"text":"abc"})", ws.path(), &sandbox());
  INFO(r.content);
  REQUIRE(r.ok);
  // {"text":"abc"} is 14 bytes; the output is text, so it comes back as a string.
  CHECK_THAT(r.content, Catch::Contains(R"("result":"got: 14 bytes")"));
}

TEST_CASE("a script tool that exits non-zero reports its exit code and stderr",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool = script(script_language::python,
                     "import sys\nprint('partial')\nsys.stderr.write('bad input\\n')\nsys.exit(3)");
  auto r = call_tool(*tool, R"({"text":"x"})", ws.path(), &sandbox());
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "tool_error");
  CHECK_THAT(r.content, Catch::Contains(R"("exit_code":3)"));
  CHECK_THAT(r.content, Catch::Contains(R"("stderr":"bad input\n")"));
  CHECK_THAT(r.content, Catch::Contains(R"("stdout":"partial\n")"));
  CHECK_THAT(r.content, Catch::Contains("the script exited with code 3"));
}

TEST_CASE("a script tool's timeout kills it", "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool = script(script_language::bash, "while true; do :; done", 1s);
  tool_result r;
  const auto took = timed([&] { r = call_tool(*tool, R"({"text":"x"})", ws.path(), &sandbox()); });
  CHECK_FALSE(r.ok);
  CHECK(r.failure_kind == "timeout");
  CHECK_THAT(r.content, Catch::Contains("timeout of 1 s"));
  CHECK(took < 10s);
}

TEST_CASE("a script tool runs in the sandbox: no network, arguments invalid before a run",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  auto tool =
      script(script_language::python, "import socket\n"
                                      "try:\n"
                                      "  socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
                                      "  print('connected')\n"
                                      "except OSError as e:\n"
                                      "  print('no network')\n");
  auto r = call_tool(*tool, R"({"text":"x"})", ws.path(), &sandbox());
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("result":"no network")"));
  auto bad = call_tool(*tool, R"({"txt":"x"})", ws.path(), &sandbox());
  CHECK(bad.failure_kind == "invalid_arguments");
  auto unsandboxed = call_tool(*tool, R"({"text":"x"})", ws.path(), nullptr);
  CHECK(unsandboxed.failure_kind == "policy_blocked");
}

TEST_CASE("a script tool's code may come from a file, read at every call",
          "[tools][script_tool][sandbox]") {
  temp_dir ws;
  temp_dir scripts;
  const auto file = scripts.path() / "tool.py";
  std::ofstream(file) << "print('first version')\n";
  custom_tool_settings t;
  t.name = "from_file";
  t.kind = custom_tool_kind::script;
  t.file = file.string();
  t.parameters = R"({"type":"object","properties":{}})";
  auto made = make_custom_tool(t, nullptr);
  REQUIRE(made);
  auto r = call_tool(**made, "{}", ws.path(), &sandbox());
  REQUIRE(r.ok);
  CHECK_THAT(r.content, Catch::Contains(R"("result":"first version")"));
  std::ofstream(file) << "print('second version')\n";
  auto again = call_tool(**made, "{}", ws.path(), &sandbox());
  CHECK_THAT(again.content, Catch::Contains(R"("result":"second version")"));
  std::filesystem::remove(file);
  auto gone = call_tool(**made, "{}", ws.path(), &sandbox());
  CHECK_FALSE(gone.ok);
  CHECK_THAT(gone.content, Catch::Contains("cannot be read"));
}
