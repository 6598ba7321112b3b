#pragma once

/// \file
/// Syncing the providers and agents declared in the config file into the database at
/// start, so the API (which edits the same records) and the runtime see one catalog.
/// Matching is by name: a declared entry updates its row or creates it; rows that are
/// not declared are left alone (they may have been created through the API).

#include <cstddef>
#include <vector>

#include "troupe/runtime/agent_config.hpp"
#include "troupe/storage/connection.hpp"

namespace troupe::storage {

/// What a sync did.
struct catalog_sync_result {
  std::size_t providers_created = 0;
  std::size_t providers_updated = 0;
  std::size_t agents_created = 0;
  std::size_t agents_updated = 0;
};

/// Upserts `providers` and `agents` by name in one transaction. Inline API keys are
/// never written: only `api_key_env` is stored, as the key's reference.
expected<catalog_sync_result> sync_declared_catalog(connection& c,
                                                    const std::vector<provider_settings>& providers,
                                                    const std::vector<agent_settings>& agents);

} // namespace troupe::storage
