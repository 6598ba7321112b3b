// Secrets at rest: the key file (created 0600, refused when too open, of the wrong size
// or not a regular file), sealing and opening, and the start-up step that seals provider
// keys an older build stored in plain text, leaving no copy of them in the file.

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "storage/storage_fixture.hpp"
#include "troupe/runtime/base64.hpp"
#include "troupe/storage/secret_box.hpp"

using namespace troupe;
using namespace troupe::storage;
using namespace troupe::storage::testing;

namespace {

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

// Every byte SQLite keeps for this database: the main file, its WAL and shared memory.
std::string database_bytes(const std::filesystem::path& db) {
  std::string all = file_bytes(db);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    auto side = db;
    side += suffix;
    if (std::filesystem::exists(side)) {
      all += file_bytes(side);
    }
  }
  return all;
}

secret_box test_box(char fill = 'k') {
  return must(secret_box::from_key(std::string(secret_box::key_size, fill)));
}

} // namespace

TEST_CASE("a sealed secret opens to its plaintext, and two seals of one value differ",
          "[storage][secrets]") {
  const auto box = test_box();
  const auto a = must(box.seal("sk-round-trip"));
  const auto b = must(box.seal("sk-round-trip"));
  CHECK(a.starts_with("v1:"));
  CHECK(a.find("sk-round-trip") == std::string::npos);
  CHECK(a != b);
  CHECK(must(box.open(a)) == "sk-round-trip");
  CHECK(must(box.open(b)) == "sk-round-trip");
  CHECK(must(box.open(must(box.seal("")))).empty());
  CHECK(secret_box::is_sealed(a));
  CHECK_FALSE(secret_box::is_sealed("sk-plain"));
}

TEST_CASE("a sealed secret does not open under another key, changed, truncated or malformed",
          "[storage][secrets]") {
  const auto box = test_box('a');
  const auto sealed = must(box.seal("sk-tamper"));
  auto other = test_box('b').open(sealed);
  REQUIRE_FALSE(other);
  CHECK_THAT(other.error().message, Catch::Contains("does not authenticate"));

  // Flip one byte of the ciphertext (past the nonce), keeping valid base64.
  auto raw = must(base64_decode(std::string_view(sealed).substr(3)));
  raw[14] = static_cast<char>(raw[14] ^ 0x01);
  CHECK_FALSE(box.open("v1:" + base64_encode(raw)));
  CHECK_FALSE(box.open("v1:" + base64_encode(raw.substr(0, 20))));
  CHECK_FALSE(box.open("v1:***"));
  auto unknown = box.open("v9:abcd");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::Contains("no format"));
  CHECK_FALSE(secret_box::from_key("short"));
}

TEST_CASE("reveal_secret opens sealed values and passes plain text written before sealing",
          "[storage][secrets]") {
  const auto box = test_box();
  const auto sealed = must(box.seal("sk-reveal"));
  CHECK(must(reveal_secret(sealed, &box)) == "sk-reveal");
  CHECK(must(reveal_secret("sk-legacy", &box)) == "sk-legacy");
  CHECK(must(reveal_secret("", nullptr)).empty());
  auto no_box = reveal_secret(sealed, nullptr);
  REQUIRE_FALSE(no_box);
  CHECK_THAT(no_box.error().message, Catch::Contains("secret.key"));
}

TEST_CASE("the key file is created with mode 0600 and the same key is loaded at the next start",
          "[storage][secrets]") {
  temp_dir dir;
  const auto first = must(secret_box::load_or_create(dir.path()));
  const auto path = secret_key_path(dir.path());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_size == 32);
  const auto sealed = must(first.seal("sk-persisted"));
  const auto second = must(secret_box::load_or_create(dir.path()));
  CHECK(must(second.open(sealed)) == "sk-persisted");
}

TEST_CASE("a key file readable by others, of the wrong size or not a regular file is refused",
          "[storage][secrets]") {
  temp_dir dir;
  must(secret_box::load_or_create(dir.path()));
  const auto path = secret_key_path(dir.path());

  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  auto open_mode = secret_box::load_or_create(dir.path());
  REQUIRE_FALSE(open_mode);
  CHECK(open_mode.error().code == errc::permission_denied);
  CHECK_THAT(open_mode.error().message,
             Catch::Contains("mode 0644") && Catch::Contains("chmod 600"));
  REQUIRE(::chmod(path.c_str(), 0660) == 0);
  CHECK_FALSE(secret_box::load_or_create(dir.path()));

  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  REQUIRE(::truncate(path.c_str(), 31) == 0);
  auto short_file = secret_box::load_or_create(dir.path());
  REQUIRE_FALSE(short_file);
  CHECK_THAT(short_file.error().message, Catch::Contains("31 bytes"));

  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  auto directory = secret_box::load_or_create(dir.path());
  REQUIRE_FALSE(directory);
  CHECK_THAT(directory.error().message, Catch::Contains("not a regular file"));

  std::filesystem::remove(path);
  const auto elsewhere = dir.path() / "elsewhere.key";
  must(secret_box::load_or_create(dir.path()));
  std::filesystem::rename(path, elsewhere);
  std::filesystem::create_symlink(elsewhere, path);
  auto link = secret_box::load_or_create(dir.path());
  REQUIRE_FALSE(link);
  CHECK_THAT(link.error().message, Catch::Contains("symbolic link"));
}

TEST_CASE("provider keys stored in plain text are sealed at start and leave no copy in the file",
          "[storage][secrets]") {
  temp_dir dir;
  const std::string marker = "sk-plain-9f3c2a7be41d";
  {
    // What an older build wrote: the key as given.
    auto db = must(open_writer(dir.db(), sync_mode::normal));
    provider_record p;
    p.name = "legacy";
    p.kind = "openai";
    p.api_key = marker;
    must(insert_provider(db, p));
    provider_record q;
    q.name = "by-reference";
    q.kind = "openai";
    q.api_key_ref = "TROUPE_KEY_OTHER";
    must(insert_provider(db, q));
  }
  REQUIRE(database_bytes(dir.db()).find(marker) != std::string::npos);

  const auto box = must(secret_box::load_or_create(dir.path()));
  auto db = must(open_writer(dir.db(), sync_mode::normal));
  CHECK(must(seal_plaintext_provider_keys(db, box)) == 1);
  const auto rows = must(list_providers(db, {}));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].api_key.starts_with("v1:"));
  CHECK(must(box.open(rows[0].api_key)) == marker);
  CHECK(rows[1].api_key.empty());
  CHECK(database_bytes(dir.db()).find(marker) == std::string::npos);

  // Sealed values are left as they are: a second start seals nothing.
  CHECK(must(seal_plaintext_provider_keys(db, box)) == 0);
  CHECK(must(find_provider(db, rows[0].id)).api_key == rows[0].api_key);
}
