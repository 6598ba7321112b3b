#include "troupe/runtime/harness/blocker.hpp"

#include <string>

#include "harness/text.hpp"

namespace troupe::harness {

namespace {

std::optional<blocker_kind> status_kind(int status) noexcept {
  switch (status) {
    case 401:
      return blocker_kind::auth_failed;
    case 403:
      return blocker_kind::permission_denied;
    case 404:
    case 410:
      return blocker_kind::not_found;
    case 408:
    case 504:
      return blocker_kind::timeout;
    case 429:
      return blocker_kind::rate_limited;
    case 451:
      return blocker_kind::policy_blocked;
    default:
      return std::nullopt;
  }
}

// "HTTP 403", "status 404", "status code: 429", "(401)" in error text.
std::optional<int> status_in_text(std::string_view text) {
  for (std::string_view marker : {"http ", "http/1.1 ", "http/2 ", "status ", "status: ",
                                  "status code ", "status code: ", "status=", "code "}) {
    for (auto pos = text.find(marker); pos != std::string_view::npos;
         pos = text.find(marker, pos + 1)) {
      const auto digits = pos + marker.size();
      if (digits + 3 > text.size()) {
        continue;
      }
      bool ok = true;
      int value = 0;
      for (std::size_t i = digits; i < digits + 3; ++i) {
        if (text[i] < '0' || text[i] > '9') {
          ok = false;
          break;
        }
        value = value * 10 + (text[i] - '0');
      }
      const bool bounded =
          digits + 3 == text.size() || text[digits + 3] < '0' || text[digits + 3] > '9';
      if (ok && bounded && value >= 100 && value <= 599) {
        return value;
      }
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<blocker_kind> blocker_of_status(int http_status) noexcept {
  return status_kind(http_status);
}

std::string_view to_string(blocker_kind k) noexcept {
  switch (k) {
    case blocker_kind::permission_denied:
      return "permission_denied";
    case blocker_kind::auth_failed:
      return "auth_failed";
    case blocker_kind::policy_blocked:
      return "policy_blocked";
    case blocker_kind::not_found:
      return "not_found";
    case blocker_kind::rate_limited:
      return "rate_limited";
    case blocker_kind::timeout:
      return "timeout";
    case blocker_kind::tool_error:
      return "tool_error";
  }
  return "tool_error";
}

std::optional<blocker_kind> parse_blocker_kind(std::string_view name) noexcept {
  for (const auto k :
       {blocker_kind::permission_denied, blocker_kind::auth_failed, blocker_kind::policy_blocked,
        blocker_kind::not_found, blocker_kind::rate_limited, blocker_kind::timeout,
        blocker_kind::tool_error}) {
    if (to_string(k) == name) {
      return k;
    }
  }
  return std::nullopt;
}

bool is_terminal(blocker_kind k) noexcept {
  return k == blocker_kind::permission_denied || k == blocker_kind::auth_failed ||
         k == blocker_kind::policy_blocked || k == blocker_kind::not_found;
}

blocker_kind classify_failure(std::string_view error_text, std::optional<int> http_status,
                              bool refused_by_harness) {
  const auto text = detail::fold(error_text);
  if (!http_status) {
    http_status = status_in_text(text);
  }
  if (http_status) {
    if (auto kind = status_kind(*http_status)) {
      return *kind;
    }
  }
  using detail::contains_any;
  if (contains_any(text, {"permission denied", "access denied", "forbidden", "eacces", "eperm",
                          "operation not permitted", "not permitted", "无权限", "没权限",
                          "权限不足", "无权访问", "被拒绝"})) {
    return blocker_kind::permission_denied;
  }
  if (contains_any(text, {"unauthorized", "unauthenticated", "auth failed", "authentication",
                          "invalid api key", "invalid token", "token expired", "未授权", "认证失败",
                          "鉴权失败", "登录失效"})) {
    return blocker_kind::auth_failed;
  }
  if (refused_by_harness ||
      contains_any(text, {"blocked by harness", "blocked by policy", "skipped by policy",
                          "blocked by contract", "not allowed by contract", "dangerous command",
                          "策略拦截", "规则拦截"})) {
    return blocker_kind::policy_blocked;
  }
  if (contains_any(text, {"not found", "no such file", "no such tool", "unknown tool",
                          "does not exist", "enoent", "不存在", "未找到", "找不到"})) {
    return blocker_kind::not_found;
  }
  if (contains_any(text, {"rate limit", "rate-limit", "ratelimit", "too many requests", "限流",
                          "频率限制"})) {
    return blocker_kind::rate_limited;
  }
  if (contains_any(text, {"timeout", "timed out", "deadline exceeded", "context deadline",
                          "etimedout", "超时"})) {
    return blocker_kind::timeout;
  }
  return blocker_kind::tool_error;
}

std::string_view required_action(blocker_kind k) noexcept {
  switch (k) {
    case blocker_kind::permission_denied:
    case blocker_kind::auth_failed:
      return "Say which resource or tool lacks permission or credentials and ask the user to "
             "grant access.";
    case blocker_kind::policy_blocked:
      return "Say that the call was refused by policy and stop attempting the refused "
             "operation.";
    case blocker_kind::not_found:
      return "Say which tool or resource does not exist and ask the user to confirm the name "
             "or configuration.";
    case blocker_kind::rate_limited:
      return "Retry later, or say that the external service is rate limiting.";
    case blocker_kind::timeout:
      return "Retry the tool, possibly with a smaller request, or say that it timed out.";
    case blocker_kind::tool_error:
      return "Retry with corrected arguments or another tool; if it still fails, explain the "
             "failure.";
  }
  return "";
}

} // namespace troupe::harness
