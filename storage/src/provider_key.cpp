#include "troupe/storage/provider_key.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace troupe::storage {

expected<std::string> provider_api_key(const provider_record& p,
                                       std::span<const provider_settings> declared,
                                       const std::map<std::string, std::string>& environment,
                                       const key_env_policy& key_env, const secret_box* secrets) {
  const auto d = std::find_if(declared.begin(), declared.end(),
                              [&](const provider_settings& s) { return s.name == p.name; });
  if (d != declared.end()) {
    if (auto key = d->resolve_api_key(environment, key_env); !key.empty()) {
      return key;
    }
  }
  if (!p.api_key.empty()) {
    // Opened here, where a request needs it, and nowhere else.
    auto key = reveal_secret(p.api_key, secrets);
    if (!key) {
      return fail(errc::invalid_argument,
                  fmt::format("provider '{}': api_key: {}", p.name, key.error().message));
    }
    return key;
  }
  if (p.api_key_ref.empty()) {
    return std::string();
  }
  if (auto allowed =
          key_env.check(fmt::format("provider '{}': api_key_ref", p.name), p.api_key_ref);
      !allowed) {
    return tl::unexpected(allowed.error());
  }
  const auto it = environment.find(p.api_key_ref);
  return it == environment.end() ? std::string() : it->second;
}

} // namespace troupe::storage
