#include "troupe/runtime/harness/outcome.hpp"

#include <array>
#include <string>

#include "harness/json_shape.hpp"
#include "harness/text.hpp"

namespace troupe::harness {

namespace {

using detail::contains_any;

constexpr std::array<std::string_view, 9> deliverable_extensions = {
    ".md", ".html", ".xlsx", ".csv", ".docx", ".pdf", ".txt", ".png", ".json"};

bool explains_blocker(std::string_view s) {
  if (s.find("权限") != std::string_view::npos &&
      contains_any(s, {"无法", "不能", "没有", "缺少", "不足", "被拒绝", "失败"})) {
    return true;
  }
  return contains_any(
      s, {"无法继续",      "无法完成",       "不能继续",     "不能完成",     "缺少必要",
          "被拒绝",        "权限不足",       "缺少权限",     "无权限",       "没权限",
          "无权访问",      "未授权",         "认证失败",     "鉴权失败",     "工具失败",
          "工具报错",      "调用失败",       "执行失败",     "请求失败",     "超时",
          "限流",          "不存在",         "未找到",       "blocked",      "failed",
          "failure",       "error",          "forbidden",    "unauthorized", "permission denied",
          "access denied", "cannot",         "can't",        "could not",    "couldn't",
          "unable to",     "not able to",    "was refused",  "were refused", "rate limit",
          "timed out",     "does not exist", "doesn't exist"});
}

bool has_result_cue(std::string_view s) {
  if (contains_any(s, {"如下",
                       "结果如下",
                       "结论",
                       "概览",
                       "摘要",
                       "明细",
                       "清单",
                       "排名",
                       "列表",
                       "报告内容",
                       "输出文件",
                       "交付文件",
                       "文件清单",
                       "下载链接",
                       "here is",
                       "here are",
                       "here's",
                       "below is",
                       "below are",
                       "the result is",
                       "the results are",
                       "results:",
                       "in summary",
                       "summary:",
                       "conclusion",
                       "i have created",
                       "i've created",
                       "i have saved",
                       "i've saved",
                       "i have generated",
                       "i've generated",
                       "i have written",
                       "i've written",
                       "i have completed",
                       "i've completed",
                       "i have finished",
                       "i've finished",
                       "has been completed",
                       "have been completed",
                       "is complete",
                       "all done",
                       "successfully",
                       "the answer is"})) {
    return true;
  }
  if (s.starts_with("## ") || s.starts_with("### ") || s.find("\n## ") != std::string_view::npos ||
      s.find("\n### ") != std::string_view::npos) {
    return true;
  }
  if (s.find("\n|") != std::string_view::npos &&
      (s.find("|---") != std::string_view::npos || s.find("| ---") != std::string_view::npos)) {
    return true;
  }
  if (s.find("outputs/") != std::string_view::npos ||
      s.find("sandbox:/") != std::string_view::npos) {
    return true;
  }
  const bool links = s.find("](") != std::string_view::npos;
  const bool claims =
      contains_any(s, {"已生成", "已保存", "已完成", "saved", "created", "generated"});
  if (links || claims) {
    for (auto ext : deliverable_extensions) {
      if (s.find(ext) != std::string_view::npos) {
        return true;
      }
    }
  }
  return false;
}

bool has_partial_cue(std::string_view s) {
  return contains_any(s, {"partially completed", "partially done", "partially succeeded",
                          "partial results", "部分完成", "部分成功"});
}

bool has_progress_cue(std::string_view s) {
  return contains_any(s, {"请稍等",
                          "稍等",
                          "稍后",
                          "马上",
                          "让我直接",
                          "让我继续",
                          "我来继续",
                          "我会继续",
                          "我将继续",
                          "继续执行",
                          "继续生成",
                          "继续整理",
                          "继续查询",
                          "继续分析",
                          "现在正在",
                          "正在生成报告",
                          "正在生成文件",
                          "正在生成 html",
                          "正在生成html",
                          "正在编写",
                          "正在整理",
                          "正在处理",
                          "正在执行",
                          "正在调用",
                          "正在查询",
                          "正在分析",
                          "正在导出",
                          "正在保存",
                          "生成中",
                          "编写中",
                          "整理中",
                          "处理中",
                          "执行中",
                          "现在用",
                          "现在使用",
                          "现在开始",
                          "现在整理",
                          "现在生成",
                          "现在编写",
                          "现在处理",
                          "现在执行",
                          "现在查询",
                          "现在分析",
                          "现在运行",
                          "现在导出",
                          "现在保存",
                          "现在汇总",
                          "接下来我会",
                          "接下来我将",
                          "接下来会",
                          "接下来将",
                          "下一步我会",
                          "下一步我将",
                          "下一步会",
                          "下一步将",
                          "please wait",
                          "one moment",
                          "hold on",
                          "stay tuned",
                          "i'll now",
                          "i will now",
                          "let me now",
                          "now let me",
                          "now i'll",
                          "now i will",
                          "i'm going to",
                          "i am going to",
                          "i'll start",
                          "i will start",
                          "let me start",
                          "let me first",
                          "i'll continue",
                          "i will continue",
                          "let me continue",
                          "continuing with",
                          "working on it",
                          "i'm working on",
                          "i am working on",
                          "in progress",
                          "next, i'll",
                          "next i'll",
                          "next, i will",
                          "next i will",
                          "i'll proceed",
                          "i will proceed",
                          "proceeding to",
                          "i'll get back",
                          "be right back",
                          "let me check",
                          "let me look",
                          "let me run",
                          "let me search",
                          "let me fetch",
                          "let me generate",
                          "let me create",
                          "let me write"});
}

} // namespace

std::string_view to_string(outcome o) noexcept {
  switch (o) {
    case outcome::unknown:
      return "unknown";
    case outcome::success:
      return "success";
    case outcome::blocked:
      return "blocked";
    case outcome::partial:
      return "partial";
    case outcome::progress_only:
      return "progress_only";
  }
  return "unknown";
}

outcome classify_outcome(std::string_view answer) {
  const auto trimmed = detail::trim(answer);
  if (trimmed.empty()) {
    return outcome::unknown;
  }
  const auto s = detail::fold(trimmed);
  const bool blocker = explains_blocker(s);
  const bool result = has_result_cue(s);
  if ((blocker && result) || has_partial_cue(s)) {
    return outcome::partial;
  }
  if (blocker) {
    return outcome::blocked;
  }
  if (result) {
    return outcome::success;
  }
  if (has_progress_cue(s) && detail::json_shape_of(trimmed) == detail::json_shape::invalid) {
    return outcome::progress_only;
  }
  return outcome::unknown;
}

} // namespace troupe::harness
