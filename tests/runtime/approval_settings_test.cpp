// Approval rules and the skills/approval settings (issue 19).

#include <catch2/catch.hpp>

#include "troupe/runtime/approval.hpp"
#include "troupe/runtime/prompt/skills_block.hpp"
#include "troupe/runtime/settings.hpp"

using namespace troupe;

TEST_CASE("an agent's approval table overrides the tool's setting, which overrides the strict "
          "profile",
          "[approval]") {
  std::map<std::string, approval_mode, std::less<>> table = {
      {"code_interpreter", approval_mode::always}};
  approval_inputs in;
  in.tool = "code_interpreter";
  CHECK(approval_for(in) == approval_mode::never);
  in.profile = "strict";
  CHECK(approval_for(in) == approval_mode::agent_initiated);
  in.tool_default = approval_mode::never;
  CHECK(approval_for(in) == approval_mode::never);
  in.agent_overrides = &table;
  CHECK(approval_for(in) == approval_mode::always);

  approval_inputs http;
  http.tool = "post_invoice";
  http.profile = "strict";
  CHECK(approval_for(http) == approval_mode::never);
  http.writes_over_http = true;
  CHECK(approval_for(http) == approval_mode::agent_initiated);
  approval_inputs exec;
  exec.tool = "exec";
  exec.profile = "strict";
  CHECK(approval_for(exec) == approval_mode::agent_initiated);
  exec.tool = "read";
  CHECK(approval_for(exec) == approval_mode::never);
}

TEST_CASE("agent_initiated asks unless the user's latest message names the tool", "[approval]") {
  CHECK(user_asked_for("code_interpreter", "please run code_interpreter on this"));
  CHECK(user_asked_for("code_interpreter", "Use the Code Interpreter to sum it"));
  CHECK(user_asked_for("exec", "exec: ls -la"));
  CHECK_FALSE(user_asked_for("exec", "execute the plan"));
  CHECK_FALSE(user_asked_for("exec", "what is 2+2?"));
  CHECK_FALSE(user_asked_for("run_code", "run code_x now"));
  CHECK(needs_approval(approval_mode::always, "exec", "exec it"));
  CHECK_FALSE(needs_approval(approval_mode::never, "exec", "anything"));
  CHECK(needs_approval(approval_mode::agent_initiated, "exec", "tidy my files"));
  CHECK_FALSE(needs_approval(approval_mode::agent_initiated, "exec", "use exec to tidy"));
}

TEST_CASE("skills, approval tables, profiles and timeouts are read from the config and printed "
          "back",
          "[approval][settings]") {
  const std::string toml = R"(
[tools]
approval_timeout_s = 30
[skills]
dir = "/srv/skills"
dirs = ["/opt/more-skills"]
runners.ts = "/usr/bin/node --experimental-strip-types"
[[agents]]
name = "a"
skills = "*"
approval = { code_interpreter = "always", exec = "agent_initiated" }
approval_profile = "strict"
approval_timeout_s = 5
[[agents]]
name = "b"
skills = ["run_code"]
)";
  // A file with [[tools]] entries has no [tools] table (settings.cpp): the entries apart.
  const std::string tools_toml = R"(
[[tools]]
name = "post_it"
url = "https://example.org/x"
method = "POST"
approval = "always"
)";
  auto s = apply_toml({}, toml, "t.toml");
  INFO((s ? "" : s.error().message));
  REQUIRE(s);
  CHECK(s->tools.approval_timeout_s == 30);
  CHECK(s->skills.dir == "/srv/skills");
  CHECK(s->skills.folders("/data") ==
        std::vector<std::filesystem::path>{"/srv/skills", "/opt/more-skills"});
  CHECK(s->skills.runners.at("ts") == "/usr/bin/node --experimental-strip-types");
  REQUIRE(s->agents.size() == 2);
  CHECK(s->agents[0].skills == std::vector<std::string>{"*"});
  CHECK(s->agents[0].skill_enabled("anything"));
  CHECK(s->agents[0].approval.at("code_interpreter") == approval_mode::always);
  CHECK(s->agents[0].approval.at("exec") == approval_mode::agent_initiated);
  CHECK(s->agents[0].approval_profile == "strict");
  CHECK(s->agents[0].approval_timeout_s == 5);
  CHECK(s->agents[1].skill_enabled("run_code"));
  CHECK_FALSE(s->agents[1].skill_enabled("other"));
  auto with_tools = apply_toml({}, tools_toml, "tools.toml");
  INFO((with_tools ? "" : with_tools.error().message));
  REQUIRE(with_tools);
  REQUIRE(with_tools->custom_tools.size() == 1);
  CHECK(with_tools->custom_tools[0].approval == approval_mode::always);
  // Printed and read again, nothing changes.
  auto again = apply_toml({}, to_toml(*s), "printed");
  INFO((again ? "" : again.error().message));
  REQUIRE(again);
  CHECK(again->agents[0].approval == s->agents[0].approval);
  CHECK(again->skills.runners == s->skills.runners);
  CHECK(again->skills.dirs == s->skills.dirs);
  CHECK(again->agents[0].approval_profile == "strict");
  CHECK(again->agents[0].approval_timeout_s == 5);
  CHECK(again->agents[0].skills == s->agents[0].skills);
  CHECK(again->agents[1].skills == s->agents[1].skills);
  CHECK(again->tools.approval_timeout_s == 30);
  // A bad mode in an agent's table is named by its key.
  auto bad_mode =
      apply_toml({}, "[[agents]]\nname = \"a\"\napproval = { exec = \"sometimes\" }\n", "m.toml");
  REQUIRE_FALSE(bad_mode);
  CHECK_THAT(bad_mode.error().message, Catch::Contains("'approval.exec'"));

  for (const auto* bad :
       {"[[agents]]\nname = \"a\"\napproval = { exec = \"sometimes\" }\n",
        "[[agents]]\nname = \"a\"\nskills = \"run_code\"\n",
        "[[agents]]\nname = \"a\"\napproval_profile = \"lax\"\n",
        "[[tools]]\nname = \"t\"\nurl = \"https://x.org\"\napproval = \"maybe\"\n",
        "[skills]\ndirs = [1]\n"}) {
    auto r = apply_toml({}, bad, "bad.toml");
    INFO(bad);
    CHECK_FALSE(r);
  }
  CHECK(settings{}.skills.folders("/data") == std::vector<std::filesystem::path>{"/data/skills"});
}

TEST_CASE("the skills block costs one line per skill with its tags on the first and last",
          "[skills][prompt]") {
  const std::vector<std::string> lines = {"- a: A.", "- b: B.\nsneaky"};
  const auto block = prompt::render_skills_block(lines);
  CHECK(block == "<skills>- a: A.\n- b: B. sneaky</skills>");
  CHECK(prompt::render_skills_block({}).empty());
}
