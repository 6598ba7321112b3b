// What a conversation leaves behind: ephemeral conversations found by age and deleted only
// while still expired, their files' rows deleted with them, and the bytes on disk removed.

#include <fstream>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/storage/file_store.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

row_id add_conversation_at(fresh_db& f, row_id owner, row_id agent, const std::string& uuid,
                           bool ephemeral, std::int64_t at) {
  conversation_record c;
  c.uuid = uuid;
  c.owner_user_id = owner;
  c.agent_id = agent;
  c.ephemeral = ephemeral;
  c.created_at = at;
  c.updated_at = at;
  return must(insert_conversation(f.db, c));
}

void add_file(fresh_db& f, row_id owner, row_id conversation, const std::string& uuid) {
  file_record file;
  file.uuid = uuid;
  file.owner_user_id = owner;
  file.conversation_id = conversation;
  file.kind = "artifact";
  file.name = uuid + ".csv";
  file.storage_path = "files/" + uuid;
  must(insert_file(f.db, file));
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

} // namespace

TEST_CASE("a conversation keeps whether it is ephemeral", "[storage][lifecycle]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto kept = add_conversation_at(f, ann, agent, "kept", false, 1000);
  const auto gone = add_conversation_at(f, ann, agent, "gone", true, 1000);
  CHECK_FALSE(must(find_conversation(f.db, kept)).ephemeral);
  CHECK(must(find_conversation(f.db, gone)).ephemeral);
  CHECK(must(find_conversation_by_uuid(f.db, "gone", ann)).ephemeral);
}

TEST_CASE("expired ephemeral conversations are the idle ones with no active run, oldest first",
          "[storage][lifecycle]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto agent = f.add_agent();
  add_conversation_at(f, ann, agent, "old", true, 1000);
  add_conversation_at(f, ann, agent, "older", true, 500);
  add_conversation_at(f, ann, agent, "fresh", true, 9000);
  add_conversation_at(f, ann, agent, "kept", false, 100);
  const auto busy = add_conversation_at(f, ann, agent, "busy", true, 200);
  f.add_run(busy, agent, "run-busy", run_status::running);
  const auto done = add_conversation_at(f, ann, agent, "done", true, 300);
  f.add_run(done, agent, "run-done", run_status::succeeded);
  // add_run does not touch updated_at; the conversation is as idle as it was.

  const auto expired = must(expired_ephemeral_conversations(f.db, 5000, 10));
  REQUIRE(expired.size() == 3);
  CHECK(expired[0].uuid == "done");
  CHECK(expired[1].uuid == "older");
  CHECK(expired[2].uuid == "old");
  CHECK(must(expired_ephemeral_conversations(f.db, 5000, 1)).size() == 1);
}

TEST_CASE("an expired ephemeral conversation is deleted only while it is still expired",
          "[storage][lifecycle]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto id = add_conversation_at(f, ann, agent, "e1", true, 1000);
  add_file(f, ann, id, "artifact-1");
  // A message since the listing makes it recent: not deleted.
  f.add_message(id, "user", "still here?");
  CHECK_FALSE(must(delete_expired_ephemeral(f.db, id, 5000)));
  CHECK(find_conversation(f.db, id));
  // Long idle again (cut-off after the message), but with a run queued: not deleted.
  const auto far = now_millis() + 60'000;
  const auto queued = f.add_run(id, agent, "run-q", run_status::queued);
  CHECK_FALSE(must(delete_expired_ephemeral(f.db, id, far)));
  must(f.db.run("UPDATE runs SET status = 'succeeded' WHERE id = ?", queued));
  // Now it goes, with its messages and its files' rows.
  CHECK(must(conversation_file_paths(f.db, id)) == std::vector<std::string>{"files/artifact-1"});
  CHECK(must(delete_expired_ephemeral(f.db, id, far)));
  CHECK(find_conversation(f.db, id).error().code == errc::not_found);
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM files")) == 0);
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM messages")) == 0);
  // A conversation that is not ephemeral is never deleted this way.
  const auto kept = add_conversation_at(f, ann, agent, "k1", false, 1000);
  CHECK_FALSE(must(delete_expired_ephemeral(f.db, kept, far)));
}

TEST_CASE("deleting a conversation deletes its files' rows, not other conversations' files",
          "[storage][lifecycle]") {
  fresh_db f;
  const auto ann = f.add_user("ann");
  const auto agent = f.add_agent();
  const auto a = f.add_conversation(ann, agent, "conv-a");
  const auto b = f.add_conversation(ann, agent, "conv-b");
  add_file(f, ann, a, "a1");
  add_file(f, ann, a, "a2");
  add_file(f, ann, b, "b1");
  CHECK(must(conversation_file_paths(f.db, a)).size() == 2);
  must(delete_conversation(f.db, a));
  CHECK(must(f.db.query_int("SELECT COUNT(*) FROM files")) == 1);
  CHECK(must(conversation_file_paths(f.db, b)) == std::vector<std::string>{"files/b1"});
}

TEST_CASE("a deleted conversation's workspace and file bytes are removed from disk",
          "[storage][lifecycle]") {
  temp_dir dir;
  const auto data = dir.path();
  write_text(data / "files" / "a1", "one");
  write_text(data / "files" / "ab" / "a2", "two");
  write_text(data / "files" / "other", "someone else's");
  write_text(data / "workspaces" / "conv-a" / "sub" / "report.csv", "x,y\n");
  write_text(data / "outside.txt", "not the workspace's");
  // A symlink in the workspace to a file outside it: the link goes, the file stays.
  std::filesystem::create_symlink(data / "outside.txt", data / "workspaces" / "conv-a" / "link");

  auto removed = remove_conversation_bytes(data, "conv-a", {"files/a1", "files/ab/a2"});
  REQUIRE(removed);
  CHECK(removed->files == 2);
  CHECK(removed->workspace);
  CHECK_FALSE(std::filesystem::exists(data / "files" / "a1"));
  CHECK_FALSE(std::filesystem::exists(data / "files" / "ab" / "a2"));
  CHECK_FALSE(std::filesystem::exists(data / "workspaces" / "conv-a"));
  CHECK(std::filesystem::exists(data / "files" / "other"));
  CHECK(std::filesystem::exists(data / "outside.txt"));
  CHECK(std::filesystem::exists(data / "workspaces"));

  // Already gone: nothing to do, no error.
  auto again = remove_conversation_bytes(data, "conv-a", {"files/a1"});
  REQUIRE(again);
  CHECK(again->files == 0);
  CHECK_FALSE(again->workspace);
}

TEST_CASE("removing a conversation's bytes refuses paths that leave their directory",
          "[storage][lifecycle]") {
  temp_dir dir;
  const auto data = dir.path();
  write_text(data / "troupe.db.keep", "the database");
  write_text(data / "files" / "ok", "ok");
  auto refused = remove_conversation_bytes(
      data, "..", {"files/../troupe.db.keep", "/etc/passwd", "files/ok", "files/", "files//x"});
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error().message, Catch::Contains("files/../troupe.db.keep") &&
                                          Catch::Contains("/etc/passwd") &&
                                          Catch::Contains("workspace of '..'"));
  CHECK(std::filesystem::exists(data / "troupe.db.keep"));
  CHECK(std::filesystem::exists(data));
  // The good path among them was still removed.
  CHECK_FALSE(std::filesystem::exists(data / "files" / "ok"));
}
