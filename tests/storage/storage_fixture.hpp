#pragma once

// Shared helpers for storage tests: a fresh temporary directory with a migrated database,
// and a few rows most tests need (a user, an agent, a conversation).

#include <cstdlib>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "troupe/storage/database.hpp"
#include "troupe/storage/repositories.hpp"

namespace troupe::storage::testing {

/// A directory under /tmp, removed with everything in it when destroyed.
class temp_dir {
public:
  temp_dir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "troupe-storage-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      FAIL("mkdtemp failed");
    }
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const {
    return path_;
  }
  std::filesystem::path db() const {
    return path_ / "troupe.db";
  }

private:
  std::filesystem::path path_;
};

/// Unwraps an expected, failing the test with its error message when it holds none.
template <class T> T must(expected<T> value) {
  if (!value) {
    FAIL(value.error().message);
  }
  return std::move(*value);
}
inline void must(expected<void> value) {
  if (!value) {
    FAIL(value.error().message);
  }
}

/// A migrated database in a temporary directory.
struct fresh_db {
  temp_dir dir;
  connection db = must(open_writer(dir.db(), sync_mode::normal));

  row_id add_user(const std::string& name) {
    user_record u;
    u.name = name;
    return must(insert_user(db, u));
  }
  row_id add_agent(const std::string& uuid = "agent-1") {
    agent_record a;
    a.uuid = uuid;
    a.name = "helper";
    a.main_model = "gpt-main";
    a.fast_model = "gpt-fast";
    a.fallback_model = "gpt-fallback";
    return must(insert_agent(db, a));
  }
  row_id add_conversation(row_id owner, row_id agent, const std::string& uuid) {
    conversation_record c;
    c.uuid = uuid;
    c.owner_user_id = owner;
    c.agent_id = agent;
    return must(insert_conversation(db, c));
  }
  row_id add_run(row_id conversation, row_id agent, const std::string& uuid,
                 run_status status = run_status::queued) {
    run_record r;
    r.uuid = uuid;
    r.conversation_id = conversation;
    r.agent_id = agent;
    r.model = "big";
    r.status = status;
    return must(insert_run(db, r));
  }
  row_id add_message(row_id conversation, const std::string& role, const std::string& content) {
    message_record m;
    m.conversation_id = conversation;
    m.role = role;
    m.content = content;
    return must(insert_message(db, m));
  }
};

} // namespace troupe::storage::testing
