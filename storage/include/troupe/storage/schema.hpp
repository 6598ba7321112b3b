#pragma once

/// \file
/// The versioned schema. Migrations are applied in order at start (and by `troupe
/// migrate`), each in its own transaction that also bumps `PRAGMA user_version`. A
/// database whose version is newer than this binary knows is refused.

#include <string_view>

#include "troupe/storage/connection.hpp"

namespace troupe::storage {

/// The schema version this binary creates and understands.
int latest_schema_version() noexcept;

/// The database's schema version (0 for a new, empty file).
expected<int> schema_version(connection& conn);

/// Brings the schema up to `latest_schema_version()`. Fails with `conflict`, changing
/// nothing, when the database is newer than this binary. Returns the version reached.
expected<int> migrate(connection& conn);

/// Whether the messages full-text index (FTS5) exists in this database.
expected<bool> has_message_index(connection& conn);

/// Creates the FTS5 index of messages, fills it from the existing messages and sets up its
/// upkeep (the progress row, the update and delete triggers: message_index.hpp), if FTS5
/// is available and the index is missing. Returns whether the index exists afterwards.
expected<bool> ensure_message_index(connection& conn);

} // namespace troupe::storage
