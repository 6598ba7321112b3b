// The one key rule for runs and the providers routes: the config's declared key first,
// then the row's sealed key, then the allowed variable the row names.

#include <catch2/catch.hpp>

#include "troupe/storage/provider_key.hpp"

using namespace troupe;
using namespace troupe::storage;

namespace {

const std::map<std::string, std::string> environment = {
    {"TROUPE_KEY_ROW", "from-row-variable"},
    {"TROUPE_KEY_DECLARED", "from-declared-variable"},
    {"HOME", "/home/someone"}};

secret_box test_box() {
  return std::move(*secret_box::from_key(std::string(secret_box::key_size, 'k')));
}

} // namespace

TEST_CASE("a provider's key comes from its declaration, else its sealed row key, else its "
          "variable",
          "[storage][provider_key]") {
  const auto box = test_box();
  provider_record row;
  row.name = "p";
  row.api_key = *box.seal("from-row");
  row.api_key_ref = "TROUPE_KEY_ROW";
  provider_settings declared;
  declared.name = "p";
  declared.api_key_env = "TROUPE_KEY_DECLARED";
  const std::vector<provider_settings> config{declared};
  const key_env_policy rule;

  CHECK(provider_api_key(row, config, environment, rule, &box).value() == "from-declared-variable");
  // Declared under another name: the row's own key.
  CHECK(provider_api_key(row, {}, environment, rule, &box).value() == "from-row");
  row.api_key.clear();
  CHECK(provider_api_key(row, {}, environment, rule, &box).value() == "from-row-variable");
  row.api_key_ref.clear();
  CHECK(provider_api_key(row, {}, environment, rule, &box).value().empty());
}

TEST_CASE("a provider's key is refused when it does not open or names a variable outside "
          "the rule",
          "[storage][provider_key]") {
  const auto box = test_box();
  provider_record row;
  row.name = "p";
  row.api_key = *box.seal("secret");
  // Sealed, but this node has no box: an error naming the provider and field.
  auto no_box = provider_api_key(row, {}, environment, key_env_policy{}, nullptr);
  REQUIRE_FALSE(no_box);
  CHECK_THAT(no_box.error().message, Catch::StartsWith("provider 'p': api_key:"));
  row.api_key.clear();
  row.api_key_ref = "HOME";
  auto outside = provider_api_key(row, {}, environment, key_env_policy{}, &box);
  REQUIRE_FALSE(outside);
  CHECK_THAT(outside.error().message, Catch::StartsWith("provider 'p': api_key_ref"));
  // Allowed by the config's list, it is read.
  CHECK(provider_api_key(row, {}, environment, key_env_policy({"HOME"}), &box).value() ==
        "/home/someone");
}
