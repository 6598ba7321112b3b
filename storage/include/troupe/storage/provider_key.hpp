#pragma once

/// \file
/// The one rule for which API key a client of a provider sends, used by runs and by the
/// providers routes alike.

#include <map>
#include <span>
#include <string>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/storage/records.hpp"
#include "troupe/storage/secret_box.hpp"

namespace troupe::storage {

/// The key for provider row `p`, in this order: the key of the provider declared under
/// its name in the config (inline keys never reach the database); else the row's stored
/// key, opened with `secrets`; else the variable of `environment` that `p.api_key_ref`
/// names, which `key_env` must allow (a row written before the rule existed is refused
/// too). Empty when none is set. Errors name the provider and the field.
expected<std::string> provider_api_key(const provider_record& p,
                                       std::span<const provider_settings> declared,
                                       const std::map<std::string, std::string>& environment,
                                       const key_env_policy& key_env, const secret_box* secrets);

} // namespace troupe::storage
