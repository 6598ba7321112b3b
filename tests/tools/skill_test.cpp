#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "support/troupe_process.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/tools/skill.hpp"

using namespace troupe;
using namespace troupe::tools;
namespace fs = std::filesystem;

namespace {

// The seed's run_code skill, committed unchanged.
const fs::path seed_dir = fs::path(TROUPE_TEST_DATA_DIR) / "skills";

const char* const path_env = "/usr/local/bin:/usr/bin:/bin";

void write_file(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

std::string minimal_skill(const std::string& name) {
  return "---\nname: " + name + "\ndescription: \"Does " + name + ".\"\ntriggers: [" + name +
         "]\n---\nBody of " + name + ".\n";
}

} // namespace

TEST_CASE("the seed's run_code skill loads unchanged", "[skill]") {
  auto set = load_skills({seed_dir}, skill_runners::defaults(), path_env);
  REQUIRE(set.problems.empty());
  REQUIRE(set.skills.size() == 1);
  const auto& s = set.skills.front();
  CHECK(s.name == "run_code");
  CHECK(s.version == "1.0.0");
  CHECK(s.description.rfind("Write and execute a throwaway", 0) == 0);
  CHECK(s.triggers == std::vector<std::string>{"code", "script", "compute", "calculate", "parse",
                                               "transform", "program"});
  CHECK(s.required_bins == std::vector<std::string>{"node"});
  CHECK(s.run_script == "scripts/run.ts");
  CHECK(s.is_tool());
  CHECK(s.body.rfind("\n# Run Code Skill", 0) == 0);
  // The schema is JSON with its types kept: a list stays a list, a quoted string a string.
  auto schema = json_object::parse(s.input_schema);
  REQUIRE(schema);
  CHECK(s.input_schema.find(R"("enum":["python","javascript","bash"])") != std::string::npos);
  CHECK(s.input_schema.find(R"("required":["language","code"])") != std::string::npos);
  // Without a TypeScript runner the tool is unavailable, and the reason says how to fix it.
  CHECK_FALSE(s.runnable);
  CHECK(s.unavailable_reason.find("skills.runners.ts") != std::string::npos);
}

TEST_CASE("a skill with a runner for its extension and its script is runnable", "[skill]") {
  test::temp_dir dir;
  fs::copy(seed_dir / "run_code", dir.path() / "run_code");
  auto runners = skill_runners::defaults();
  runners.by_extension["ts"] = {"/usr/bin/node", "--experimental-strip-types"};
  {
    auto set = load_skills({dir.path()}, runners, path_env);
    REQUIRE(set.skills.size() == 1);
    CHECK_FALSE(set.skills[0].runnable);
    CHECK(set.skills[0].unavailable_reason == "its script scripts/run.ts does not exist");
  }
  write_file(dir.path() / "run_code" / "scripts" / "run.ts", "console.log('{}');\n");
  auto set = load_skills({dir.path()}, runners, path_env);
  REQUIRE(set.skills.size() == 1);
  CHECK(set.skills[0].runnable);
  CHECK(set.skills[0].unavailable_reason.empty());
}

TEST_CASE("a missing required binary makes a skill unavailable with the reason", "[skill]") {
  test::temp_dir dir;
  write_file(dir.path() / "needs" / "SKILL.md",
             "---\nname: needs\ndescription: d\nrequires:\n  bins: [no-such-program-xyz]\n---\n");
  auto set = load_skills({dir.path()}, skill_runners::defaults(), path_env);
  REQUIRE(set.skills.size() == 1);
  CHECK_FALSE(set.skills[0].runnable);
  CHECK(set.skills[0].unavailable_reason ==
        "requires 'no-such-program-xyz', which is not on this machine");
}

TEST_CASE("a broken SKILL.md is reported with its file and line beside the good ones", "[skill]") {
  test::temp_dir dir;
  fs::copy(seed_dir / "run_code", dir.path() / "run_code");
  // Line 4 opens a flow list that never closes.
  write_file(dir.path() / "broken" / "SKILL.md",
             "---\nname: broken\ndescription: d\ntriggers: [a, b\nversion: 1\n---\nbody\n");
  write_file(dir.path() / "unclosed" / "SKILL.md", "---\nname: unclosed\n");
  write_file(dir.path() / "nameless" / "SKILL.md", "---\ndescription: d\n---\n");
  write_file(dir.path() / "badapproval" / "SKILL.md",
             "---\nname: x\ndescription: d\napproval: sometimes\n---\n");
  auto set = load_skills({dir.path()}, skill_runners::defaults(), path_env);
  REQUIRE(set.skills.size() == 1);
  CHECK(set.skills[0].name == "run_code");
  REQUIRE(set.problems.size() == 4);
  // Folders are read in name order: badapproval, broken, nameless, unclosed.
  CHECK(set.problems[0].line == 4);
  CHECK(set.problems[0].message.find("approval") != std::string::npos);
  CHECK(set.problems[1].file == dir.path() / "broken" / "SKILL.md");
  CHECK(set.problems[1].line >= 4);
  CHECK(set.problems[1].line <= 5);
  CHECK(set.problems[1].message.find("invalid YAML") == 0);
  CHECK(set.problems[1].to_string().find((dir.path() / "broken" / "SKILL.md").string() + ":") == 0);
  CHECK(set.problems[2].message == "'name' is required");
  CHECK(set.problems[3].message.find("not closed") != std::string::npos);
}

TEST_CASE("a skill's name appears once: a second folder with it is a problem", "[skill]") {
  test::temp_dir dir;
  write_file(dir.path() / "a" / "SKILL.md", minimal_skill("same"));
  write_file(dir.path() / "b" / "SKILL.md", minimal_skill("same"));
  auto set = load_skills({dir.path()}, skill_runners::defaults(), path_env);
  REQUIRE(set.skills.size() == 1);
  CHECK(set.skills[0].dir == dir.path() / "a");
  REQUIRE(set.problems.size() == 1);
  CHECK(set.problems[0].message.find("already defined") != std::string::npos);
}

TEST_CASE("100 skills cost one prompt line each", "[skill]") {
  test::temp_dir dir;
  for (int i = 0; i < 100; ++i) {
    write_file(dir.path() / ("s" + std::to_string(i)) / "SKILL.md",
               minimal_skill("skill_" + std::to_string(i)) + std::string(2000, 'x') +
                   "\nmore body\n");
  }
  auto set = load_skills({dir.path()}, skill_runners::defaults(), path_env);
  REQUIRE(set.skills.size() == 100);
  std::string prompt;
  for (const auto& s : set.skills) {
    const auto line = skill_prompt_line(s);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find("xxxx") == std::string::npos);
    prompt += line + "\n";
  }
  CHECK(std::count(prompt.begin(), prompt.end(), '\n') == 100);
  CHECK(skill_prompt_line(set.skills[0]) == "- skill_0: Does skill_0. (triggers: skill_0)");
}
