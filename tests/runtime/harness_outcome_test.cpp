#include <catch2/catch.hpp>

#include "troupe/runtime/harness/blocker.hpp"
#include "troupe/runtime/harness/outcome.hpp"

using namespace troupe::harness;

TEST_CASE("final answers are classified as success, blocked, partial or progress only",
          "[runtime][harness][outcome]") {
  CHECK(classify_outcome("") == outcome::unknown);
  CHECK(classify_outcome("Paris.") == outcome::unknown);
  CHECK(classify_outcome("Here is the summary of the three papers.") == outcome::success);
  CHECK(classify_outcome("## Results\n- a\n- b") == outcome::success);
  CHECK(classify_outcome("结果如下：共 3 条") == outcome::success);
  CHECK(classify_outcome("I can’t open the repository: permission denied.") == outcome::blocked);
  CHECK(classify_outcome("由于权限不足，无法读取该文件。") == outcome::blocked);
  CHECK(classify_outcome("Here are the first two reports; the third failed with a timeout.") ==
        outcome::partial);
  CHECK(classify_outcome("I have partially completed the migration.") == outcome::partial);
  CHECK(classify_outcome("I'm going to fetch the page now.") == outcome::progress_only);
  CHECK(classify_outcome("现在开始整理数据") == outcome::progress_only);
}

TEST_CASE("the outcome classifier matches English phrases on word boundaries",
          "[runtime][harness][outcome]") {
  // "error" inside "terrors" and "blocked" inside "unblocked…" must not count as blockers.
  CHECK(classify_outcome("The night terrors stopped.") == outcome::unknown);
  // A JSON answer is never progress-only, whatever words its strings hold.
  CHECK(classify_outcome(R"({"status":"in progress"})") != outcome::progress_only);
  // "let me know" is a courtesy, not a promise of work.
  CHECK(classify_outcome("Paris. Let me know if you need more.") == outcome::unknown);
}

TEST_CASE("permission, auth, policy and not-found blockers are terminal",
          "[runtime][harness][outcome]") {
  CHECK(is_terminal(blocker_kind::permission_denied));
  CHECK(is_terminal(blocker_kind::auth_failed));
  CHECK(is_terminal(blocker_kind::policy_blocked));
  CHECK(is_terminal(blocker_kind::not_found));
  CHECK_FALSE(is_terminal(blocker_kind::rate_limited));
  CHECK_FALSE(is_terminal(blocker_kind::timeout));
  CHECK_FALSE(is_terminal(blocker_kind::tool_error));
}

TEST_CASE("tool failures are classified from HTTP status and error text",
          "[runtime][harness][outcome]") {
  CHECK(classify_failure("request failed", 401) == blocker_kind::auth_failed);
  CHECK(classify_failure("request failed", 403) == blocker_kind::permission_denied);
  CHECK(classify_failure("request failed", 404) == blocker_kind::not_found);
  CHECK(classify_failure("request failed", 429) == blocker_kind::rate_limited);
  CHECK(classify_failure("request failed", 504) == blocker_kind::timeout);
  CHECK(classify_failure("request failed", 500) == blocker_kind::tool_error);
  CHECK(classify_failure("upstream answered HTTP 429") == blocker_kind::rate_limited);
  CHECK(classify_failure("status code: 403") == blocker_kind::permission_denied);
  CHECK(classify_failure("open /etc/shadow: Permission denied") == blocker_kind::permission_denied);
  CHECK(classify_failure("Invalid API key provided") == blocker_kind::auth_failed);
  CHECK(classify_failure("cat: x.txt: No such file or directory") == blocker_kind::not_found);
  CHECK(classify_failure("command timed out after 30s") == blocker_kind::timeout);
  CHECK(classify_failure("Too Many Requests") == blocker_kind::rate_limited);
  CHECK(classify_failure("dangerous command refused") == blocker_kind::policy_blocked);
  CHECK(classify_failure("anything", std::nullopt, true) == blocker_kind::policy_blocked);
  CHECK(classify_failure("请求超时") == blocker_kind::timeout);
  CHECK(classify_failure("exit code 127: segfault") == blocker_kind::tool_error);
  CHECK_FALSE(required_action(blocker_kind::timeout).empty());
}
