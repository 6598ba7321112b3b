// Skills in the real `troupe serve` (issue 19): the seed's run_code folder loaded unchanged
// (unavailable without a TypeScript runner) and run through its python and bash paths once
// a runner is named; a broken SKILL.md reported with its file and line at start and over
// the API while the node serves, and the folder reloaded without a restart; 100 skills
// costing one prompt line each, a body entering the prompt only after `skill read`.

#include <filesystem>
#include <fstream>
#include <mutex>

#include <catch2/catch.hpp>

#include "net/mock_llm_fixture.hpp"
#include "support/api_server.hpp"
#include "support/wait_until.hpp"
#include "troupe/mock/mock_llm_server.hpp"
#include "troupe/runtime/json_object.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const fs::path data_dir = fs::path(TROUPE_TEST_DATA_DIR);

class request_log {
public:
  std::function<void(const std::string&)> observer() {
    return [this](const std::string& body) {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
    };
  }
  std::vector<std::string> all() const {
    std::lock_guard lock(mutex_);
    return bodies_;
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> bodies_;
};

troupe::mock::mock_llm_options scripted(const std::string& script, request_log& log) {
  troupe::mock::mock_llm_options o;
  auto rules = troupe::mock::parse_mock_script(script);
  REQUIRE(rules);
  o.rules = std::move(*rules);
  o.observe = log.observer();
  return o;
}

std::string provider(const mock_llm_fixture& mock) {
  return "[[providers]]\nname = \"mock\"\ntype = \"openai-compatible\"\nbase_url = \"" +
         mock.base_url() + "\"\n";
}

std::string agent(const std::string& name, const std::string& more = {}) {
  return "[[agents]]\nname = \"" + name +
         "\"\nprovider = \"mock\"\nmodel = \"mock-llm\"\ntimeout_s = 60\n"
         "system_prompt = \"You help.\"\n" +
         more;
}

void write_file(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

// The system message of a completion request.
std::string system_text(const std::string& request_body) {
  auto body = troupe::json_object::parse(request_body);
  REQUIRE(body);
  auto messages = body->element("messages");
  REQUIRE(messages);
  simdjson::dom::array list;
  REQUIRE(messages->get_array().get(list) == simdjson::SUCCESS);
  for (auto m : list) {
    std::string_view role;
    std::string_view content;
    if (m["role"].get_string().get(role) == simdjson::SUCCESS && role == "system" &&
        m["content"].get_string().get(content) == simdjson::SUCCESS) {
      return std::string(content);
    }
  }
  return {};
}

std::size_t lines_of(const std::string& text) {
  return text.empty() ? 0
                      : static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

std::size_t non_blank_lines_of(const std::string& text) {
  std::size_t n = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    if (text.find_first_not_of(" \t\r", start) < end) {
      ++n;
    }
    start = end + 1;
  }
  return n;
}

} // namespace

TEST_CASE("the seed's run_code skill loads unchanged, is unavailable without a ts runner and "
          "runs its python and bash paths when one is named",
          "[integration][skills]") {
  {
    request_log log;
    mock_llm_fixture mock(scripted("[]", log));
    api_server s({}, provider(mock) + agent("worker") + "[skills]\ndirs = [\"" +
                         (data_dir / "skills").string() + "\"]\n");
    REQUIRE(s.port() != 0);
    auto got = s.call("GET", "/api/v1/skills/run_code", s.user_token("ann"));
    INFO(got);
    REQUIRE(status_of(got) == 200);
    CHECK_THAT(body_of(got), Catch::Contains(R"("status":"unavailable")") &&
                                 Catch::Contains("skills.runners.ts") &&
                                 Catch::Contains(R"("tool":false)") &&
                                 Catch::Contains(R"("script":"scripts/run.ts")") &&
                                 Catch::Contains("# Run Code Skill"));
    CHECK_THAT(s.process().output(),
               Catch::Contains("skill 'run_code'") && Catch::Contains("is unavailable"));
  }
  // The same folder, with a scripts/run.ts beside its unchanged SKILL.md, and node named
  // as the ts runner.
  temp_dir skills;
  fs::copy(data_dir / "skills" / "run_code", skills.path() / "run_code",
           fs::copy_options::recursive);
  fs::create_directories(skills.path() / "run_code" / "scripts");
  fs::copy_file(data_dir / "skill_scripts" / "run.ts",
                skills.path() / "run_code" / "scripts" / "run.ts");
  request_log log;
  mock_llm_fixture mock(scripted(R"js([
    {"match": {"user": "compute it", "has_tool_result": false},
     "reply": {"tool_calls": [
       {"name": "run_code", "arguments": {"language": "python", "code": "print(6 * 7)"
}
},
       {"name": "run_code", "arguments": {"language": "bash", "code": "echo from-bash-$((40 + 2))"}}]
}
},
    {"match": {"user": "compute it", "has_tool_result": true}, "reply": {"text": "it is 42"}}
  ])js",
                                 log));
  api_server s({}, provider(mock) + agent("worker", "skills = [\"run_code\"]\n") +
                       "[skills]\ndir = \"" + skills.path().string() +
                       "\"\nrunners.ts = \"/usr/bin/node\"\n");
  REQUIRE(s.port() != 0);
  auto got = s.call("GET", "/api/v1/skills", s.user_token("ann"));
  REQUIRE(status_of(got) == 200);
  CHECK_THAT(body_of(got),
             Catch::Contains(R"("status":"available")") && Catch::Contains(R"("tool":true)"));
  auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"worker","message":"compute it"})");
  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  CHECK(json_field(body_of(answer), "content") == "it is 42");
  const auto bodies = log.all();
  REQUIRE(bodies.size() >= 2);
  // The tool was offered, and what the script printed in the sandbox reached the model.
  CHECK_THAT(bodies[0], Catch::Contains(R"("name":"run_code")"));
  CHECK_THAT(bodies[1], Catch::Contains(R"(\"output\":\"42\\n\")") &&
                            Catch::Contains("from-bash-42") &&
                            Catch::Contains(R"(\"sandboxed\":true)"));
}

TEST_CASE("a broken SKILL.md is reported with its file and line while the node serves, and the "
          "folder is reloaded without a restart",
          "[integration][skills]") {
  temp_dir skills;
  write_file(skills.path() / "good" / "SKILL.md",
             "---\nname: good\ndescription: \"A good skill.\"\n---\nDo good.\n");
  // Line 4 opens a flow list that never closes.
  write_file(skills.path() / "broken" / "SKILL.md",
             "---\nname: broken\ndescription: d\ntriggers: [a, b\nversion: 1\n---\nbody\n");
  request_log log;
  mock_llm_fixture mock(scripted("[]", log));
  api_server s({}, provider(mock) + agent("worker") + "[skills]\ndir = \"" +
                       skills.path().string() + "\"\n");
  REQUIRE(s.port() != 0);
  const auto user = s.user_token("ann");
  const auto broken_file = (skills.path() / "broken" / "SKILL.md").string();
  auto listed = s.call("GET", "/api/v1/skills", user);
  INFO(listed);
  REQUIRE(status_of(listed) == 200);
  CHECK_THAT(body_of(listed), Catch::Contains(R"("name":"good")") &&
                                  Catch::Contains(R"("file":")" + broken_file + "\"") &&
                                  Catch::Contains("invalid YAML"));
  CHECK((body_of(listed).find(R"("line":4)") != std::string::npos ||
         body_of(listed).find(R"("line":5)") != std::string::npos));
  CHECK_THAT(s.process().output(), Catch::Contains("skill not loaded: " + broken_file + ":"));
  CHECK(status_of(s.call("GET", "/api/v1/skills/broken", user)) == 404);

  // A new skill appears, the broken one is fixed, the good one breaks: no restart.
  write_file(skills.path() / "fresh" / "SKILL.md",
             "---\nname: fresh\ndescription: \"Arrived later.\"\n---\nNew.\n");
  write_file(skills.path() / "broken" / "SKILL.md",
             "---\nname: broken\ndescription: d\ntriggers: [a, b]\n---\nbody\n");
  write_file(skills.path() / "good" / "SKILL.md", "---\nname: good\n---\n");
  REQUIRE(wait_until(
      [&] {
        auto r = s.call("GET", "/api/v1/skills", user);
        const auto b = body_of(r);
        return b.find(R"("name":"fresh")") != std::string::npos &&
               b.find(R"("name":"broken")") != std::string::npos &&
               b.find("'description' is required") != std::string::npos;
      },
      10s));
  auto fixed = s.call("GET", "/api/v1/skills/broken", user);
  CHECK(status_of(fixed) == 200);
  CHECK(status_of(s.call("GET", "/api/v1/skills/good", user)) == 404);
  CHECK(status_of(http_exchange(s.port(), "GET", "/healthz")) == 200);
}

TEST_CASE("100 skills grow the system prompt by one line each and a skill's body enters the "
          "prompt only after skill read",
          "[integration][skills]") {
  temp_dir skills;
  for (int i = 0; i < 100; ++i) {
    const auto name = "skill_" + std::to_string(i);
    write_file(skills.path() / name / "SKILL.md",
               "---\nname: " + name + "\ndescription: \"Does task " + std::to_string(i) +
                   ".\"\ntriggers: [t" + std::to_string(i) + "]\n---\nBODY-OF-" + name +
                   "\nstep one\nstep two\n");
  }
  request_log log;
  mock_llm_fixture mock(scripted(R"([
    {"match": {"user": "plain hello"}, "reply": {"text": "hi"}},
    {"match": {"user": "skilled hello"}, "reply": {"text": "hi"}},
    {"match": {"user": "use skill 7", "has_tool_result": false},
     "reply": {"tool_calls": [{"name": "skill", "arguments": {"action": "read", "name": "skill_7"}}]}},
    {"match": {"user": "use skill 7", "has_tool_result": true}, "reply": {"text": "followed it"}}
  ])",
                                 log));
  api_server s({}, provider(mock) + agent("plain") + agent("skilled", "skills = \"*\"\n") +
                       "[skills]\ndir = \"" + skills.path().string() + "\"\n");
  REQUIRE(s.port() != 0);
  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"plain","message":"plain hello"})")) == 200);
  REQUIRE(status_of(s.call("POST", "/api/v1/chat", s.admin(),
                           R"({"agent":"skilled","message":"skilled hello"})")) == 200);
  auto answer =
      s.call("POST", "/api/v1/chat", s.admin(), R"({"agent":"skilled","message":"use skill 7"})");
  INFO(answer);
  REQUIRE(status_of(answer) == 200);
  CHECK(json_field(body_of(answer), "content") == "followed it");
  const auto bodies = log.all();
  REQUIRE(bodies.size() == 4);
  const auto plain = system_text(bodies[0]);
  const auto skilled = system_text(bodies[1]);
  INFO(skilled.substr(0, 600));
  // 100 skill lines and the blank line that separates the block from the prompt.
  CHECK(non_blank_lines_of(skilled) - non_blank_lines_of(plain) == 100);
  CHECK(lines_of(skilled) - lines_of(plain) <= 101);
  CHECK_THAT(skilled, Catch::Contains("- skill_7: Does task 7. (triggers: t7)"));
  // No body before the read; the plain agent has no skill tool.
  CHECK_THAT(bodies[0], !Catch::Contains(R"("name":"skill")"));
  CHECK_THAT(bodies[1], Catch::Contains(R"("name":"skill")") && !Catch::Contains("BODY-OF-"));
  CHECK_THAT(bodies[2], !Catch::Contains("BODY-OF-"));
  CHECK_THAT(bodies[3], Catch::Contains("BODY-OF-skill_7") && !Catch::Contains("BODY-OF-skill_8"));
}
