// Which environment variables may hold a provider's key: TROUPE_KEY_*, the built-in
// OPENAI_API_KEY, and the config file's [secrets] allowed_env; any other name is refused
// when the config is loaded and never read.

#include <catch2/catch.hpp>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/settings.hpp"

using namespace troupe;

namespace {

std::string provider_with_key_env(const std::string& name) {
  return "[[providers]]\nname = \"p\"\ntype = \"openai-compatible\"\n"
         "base_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"" +
         name + "\"\n";
}

} // namespace

TEST_CASE("a key variable must be TROUPE_KEY_*, OPENAI_API_KEY or listed in the config",
          "[runtime][settings][secrets]") {
  const key_env_policy builtin;
  CHECK(builtin.allows("TROUPE_KEY_LOCAL"));
  CHECK(builtin.allows("OPENAI_API_KEY"));
  CHECK_FALSE(builtin.allows("TROUPE_KEY_"));
  CHECK_FALSE(builtin.allows("HOME"));
  CHECK_FALSE(builtin.allows("AWS_SECRET_ACCESS_KEY"));
  CHECK_FALSE(builtin.allows("troupe_key_x"));
  CHECK_FALSE(builtin.allows(""));
  CHECK(builtin.check("api_key_ref", ""));
  auto refused = builtin.check("api_key_ref", "HOME");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_argument);
  CHECK_THAT(refused.error().message, Catch::StartsWith("api_key_ref: 'HOME' is not allowed") &&
                                          Catch::Contains("TROUPE_KEY_") &&
                                          Catch::Contains("allowed_env"));
  const key_env_policy listed({"ANTHROPIC_API_KEY"});
  CHECK(listed.allows("ANTHROPIC_API_KEY"));
  CHECK(listed.allows("TROUPE_KEY_LOCAL"));
  CHECK_FALSE(listed.allows("HOME"));
}

TEST_CASE("a provider naming any other variable is refused at config load",
          "[runtime][settings][secrets]") {
  auto home = apply_toml({}, provider_with_key_env("HOME"), "bad.toml");
  REQUIRE_FALSE(home);
  CHECK_THAT(home.error().message, Catch::Contains("bad.toml") &&
                                       Catch::Contains("provider 'p': api_key_env: 'HOME'") &&
                                       Catch::Contains("TROUPE_KEY_"));
  CHECK(apply_toml({}, provider_with_key_env("TROUPE_KEY_P"), "ok.toml"));
  CHECK(apply_toml({}, provider_with_key_env("OPENAI_API_KEY"), "ok.toml"));
}

TEST_CASE("[secrets] allowed_env admits more variables, wherever it is in the file",
          "[runtime][settings][secrets]") {
  auto after = apply_toml({},
                          provider_with_key_env("LOCAL_API_KEY") +
                              "\n[secrets]\nallowed_env = [\"LOCAL_API_KEY\"]\n",
                          "ok.toml");
  REQUIRE(after);
  CHECK(after->secrets.allowed_env == std::vector<std::string>{"LOCAL_API_KEY"});
  const key_env_policy policy(after->secrets.allowed_env);
  CHECK(after->providers[0].resolve_api_key({{"LOCAL_API_KEY", "k-local"}}, policy) == "k-local");

  // The printed config carries the list, so it loads again.
  auto again = apply_toml({}, to_toml(*after), "printed");
  REQUIRE(again);
  CHECK(again->secrets.allowed_env == after->secrets.allowed_env);

  auto bad_entry = apply_toml({}, "[secrets]\nallowed_env = [\"NOT-A-NAME\"]\n", "x.toml");
  REQUIRE_FALSE(bad_entry);
  CHECK_THAT(bad_entry.error().message,
             Catch::Contains("x.toml:2") && Catch::Contains("environment variable name"));
  CHECK_FALSE(apply_toml({}, "[secrets]\nallowed_env = \"LOCAL_API_KEY\"\n", "x.toml"));
}

TEST_CASE("allowed_env is set by the config file only, never by a flag or a variable",
          "[runtime][settings][secrets]") {
  settings s;
  auto flag = apply_setting(s, "secrets.allowed_env", "HOME");
  REQUIRE_FALSE(flag);
  CHECK_THAT(flag.error().message, Catch::Contains("unknown key"));
  setting_sources sources;
  sources.environment = {{"TROUPE_SECRETS_ALLOWED_ENV", "HOME"}};
  auto resolved = resolve_settings(sources);
  REQUIRE(resolved);
  CHECK(resolved->secrets.allowed_env.empty());
  for (const auto& info : setting_catalog()) {
    CHECK(info.key.rfind("secrets.", 0) != 0);
  }
}

TEST_CASE("a variable the policy refuses is never read, even when set",
          "[runtime][settings][secrets]") {
  provider_settings p;
  p.api_key_env = "HOME";
  CHECK(p.resolve_api_key({{"HOME", "/root"}}).empty());
  p.api_key_env = "TROUPE_KEY_X";
  CHECK(p.resolve_api_key({{"TROUPE_KEY_X", "sk-x"}}) == "sk-x");
  // The embedded catalog's OPENAI_API_KEY keeps working with no [secrets] table.
  auto real = make_embedded_catalog({{"OPENAI_API_KEY", "sk-o"}}, "");
  CHECK(real.providers[0].resolve_api_key({{"OPENAI_API_KEY", "sk-o"}}) == "sk-o");
}
