#pragma once

/// \file
/// A run's journal rebuilt from storage, for a replay once the live journal has left
/// memory (retention over, evicted by `api.journal_max_bytes`, or a restart): the entries
/// stored in `run_events` under the ids they had live, the `done` entry marked
/// `"replayed_from":"database"`. A journal whose end never reached the database (the
/// process stopped mid-run: the run row says `interrupted`) ends with `error`, `done` and
/// `[DONE]` made from the run row, numbered after both the last stored id and the
/// client's, so a client resuming with `Last-Event-ID` never sees an id twice and always
/// gets the end. A run with no stored entries (from before they were stored, or cut off
/// before its first group was) replays what its rows keep — its status, steps and final
/// answer — numbered after the client's id.

#include <cstdint>
#include <string>
#include <vector>

#include "troupe/actors/journal_entry.hpp"
#include "troupe/runtime/error.hpp"
#include "troupe/storage/connection.hpp"

namespace troupe::actors {

/// The entries of run `run_uuid` after `after_seq`, ending with `[DONE]` (marked last).
/// Fails with `not_found` when there is no such run row. Reads through `c` (a read
/// connection: this blocks the calling thread for the queries).
expected<std::vector<journal_entry>>
stored_journal(storage::connection& c, const std::string& run_uuid, std::uint64_t after_seq);

} // namespace troupe::actors
