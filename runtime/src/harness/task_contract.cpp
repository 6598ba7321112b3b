#include "troupe/runtime/harness/task_contract.hpp"

#include <algorithm>

#include "harness/text.hpp"

namespace troupe::harness {

namespace {

using detail::contains_any;
using detail::fold;

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void add_unique(std::vector<std::string>& names, std::string name) {
  if (!contains(names, name)) {
    names.push_back(std::move(name));
  }
}

// Multi-step engineering work; AIClaw's list plus a few English equivalents.
bool has_complex_markers(std::string_view text) {
  return contains_any(text, {"refactor",      "implement",   "fix",           "debug",
                             "investigate",   "run tests",   "run the tests", "add tests",
                             "write tests",   "verify",      "deploy",        "pull request",
                             "merge request", "code review", "step by step",  "step-by-step",
                             "migrate",       "end-to-end",  "规划",          "执行计划",
                             "制定计划",      "分步骤",      "完整流程",      "完整重构",
                             "重构",          "实现",        "开发",          "修复",
                             "排查",          "定位",        "验证",          "运行测试",
                             "补测试",        "测试通过",    "部署",          "提测"});
}

// Work on attached inputs.
bool has_work_on_input_markers(std::string_view text) {
  return contains_any(text,
                      {"modify", "process", "analyze", "analyse", "generate", "convert", "organize",
                       "clean up", "修改", "处理", "分析", "生成", "转换", "整理"});
}

bool has_sequence_markers(std::string_view text) {
  return contains_any(text, {"then", "after that", "afterwards", "finally", "and also", "然后",
                             "之后", "最后", "并且", "同时"});
}

// Three or more lines that start like list items ("1.", "2)", "- ", "* ").
bool has_enumerated_steps(std::string_view text) {
  int items = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    auto line = detail::trim(text.substr(start, end - start));
    if (line.starts_with("- ") || line.starts_with("* ")) {
      ++items;
    } else {
      std::size_t digits = 0;
      while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') {
        ++digits;
      }
      if (digits > 0 && digits < line.size() && (line[digits] == '.' || line[digits] == ')')) {
        ++items;
      }
    }
    start = end + 1;
  }
  return items >= 3;
}

// Work that needs a tool to be answered truthfully.
bool has_evidence_markers(std::string_view text) {
  return contains_any(text, {"search", "look up", "lookup",     "find out", "latest",    "current",
                             "today",  "news",    "price",      "weather",  "fetch",     "download",
                             "browse", "website", "run",        "execute",  "calculate", "compute",
                             "read",   "open",    "list files", "http://",  "https://",  "搜索",
                             "查询",   "检索",    "最新",       "今天",     "当前",      "运行",
                             "执行",   "计算",    "读取",       "打开",     "网页",      "下载"});
}

bool has_json_markers(std::string_view text) {
  return contains_any(text, {"in json", "as json", "json format", "json only", "only json",
                             "json object", "valid json", "return json", "output json",
                             "respond with json", "reply with json", "json格式", "json 格式",
                             "以json", "输出json", "返回json"});
}

bool has_file_output_phrases(std::string_view text) {
  return contains_any(text, {"export",          "save as",         "save it as",
                             "save them as",    "save to",         "save it to",
                             "save into",       "write to a file", "write it to a file",
                             "write a file",    "write file",      "create a file",
                             "generate a file", "as a file",       "as an attachment",
                             "downloadable",    "to a file",       "导出",
                             "保存到",          "保存为",          "保存成",
                             "另存为",          "生成文件",        "输出文件",
                             "下载文件",        "报告文件",        "html报告",
                             "html 报告",       "写入文件"});
}

bool has_inline_answer_phrases(std::string_view text) {
  return contains_any(text, {"summarize", "summarise", "explain", "tell me", "and reply",
                             "describe", "总结", "告诉我", "说明", "解释", "概述"});
}

// Tools the objective forbids by name ("don't use web_search", "不要用 exec").
void add_forbidden_tools(std::string_view text, const std::vector<std::string>& tools,
                         std::vector<std::string>& blocked) {
  for (const auto& tool : tools) {
    auto spoken = fold(tool);
    std::replace(spoken.begin(), spoken.end(), '_', ' ');
    for (const auto& name : {fold(tool), spoken}) {
      for (std::string_view prefix :
           {"don't use ", "do not use ", "without using ", "never use ", "不要使用", "不要用",
            "禁止使用", "别用", "不要使用 ", "不要用 ", "禁止使用 ", "别用 "}) {
        if (detail::find_phrase(text, std::string(prefix) + name) != std::string_view::npos) {
          add_unique(blocked, tool);
        }
      }
    }
  }
}

} // namespace

std::string_view to_string(task_complexity c) noexcept {
  switch (c) {
    case task_complexity::simple:
      return "simple";
    case task_complexity::normal:
      return "normal";
    case task_complexity::complex:
      return "complex";
  }
  return "simple";
}

std::string_view to_string(output_mode m) noexcept {
  switch (m) {
    case output_mode::text:
      return "text";
    case output_mode::json:
      return "json";
    case output_mode::file:
      return "file";
    case output_mode::mixed:
      return "mixed";
  }
  return "text";
}

bool tool_policy::is_blocked(std::string_view tool) const noexcept {
  return std::find(blocked.begin(), blocked.end(), tool) != blocked.end();
}

bool tool_policy::is_allowed(std::string_view tool) const noexcept {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), tool) != allowed.end();
}

bool task_contract::requires_validation_step() const noexcept {
  return require_tool_evidence || required_artifact_count > 0 || mode != output_mode::text;
}

bool is_bookkeeping_tool(std::string_view tool) noexcept {
  return tool == "plan" || tool == "tool_search" || tool == "finish";
}

task_contract build_contract(const contract_input& input) {
  task_contract contract;
  contract.objective = std::string(detail::trim(input.objective));
  const auto text = fold(contract.objective);

  std::vector<std::string> attachment_names;
  for (const auto& attachment : input.attachments) {
    auto name = fold(attachment);
    if (const auto slash = name.rfind('/'); slash != std::string::npos) {
      name.erase(0, slash + 1);
    }
    attachment_names.push_back(std::move(name));
  }
  const bool has_attachments = !input.attachments.empty();
  const bool has_execution_tools =
      std::any_of(input.agent_tools.begin(), input.agent_tools.end(),
                  [](const std::string& tool) { return !is_bookkeeping_tool(tool); });
  const bool has_plan_tool = contains(input.agent_tools, "plan");

  // Files the objective asks for: named or bare extensions read as outputs, plus
  // explicit output phrases ("export", "save as", "导出").
  bool file_output_mentioned = false;
  for (const auto& mention : detail::find_file_mentions(text)) {
    if ((!mention.name.empty() && contains(attachment_names, mention.name)) ||
        detail::mention_is_input(text, mention)) {
      continue;
    }
    file_output_mentioned = true;
    if (!mention.name.empty()) {
      add_unique(contract.requested_files, mention.name);
    }
  }
  const bool file_intent = file_output_mentioned || has_file_output_phrases(text);

  if (input.response_format_json) {
    contract.mode = output_mode::json;
  } else if (file_intent) {
    contract.mode = has_inline_answer_phrases(text) ? output_mode::mixed : output_mode::file;
  } else if (has_json_markers(text)) {
    contract.mode = output_mode::json;
  }
  if (contract.expects_files()) {
    contract.required_artifact_count =
        std::max(1, static_cast<int>(contract.requested_files.size()));
  }

  const bool complex_signals =
      has_complex_markers(text) || (has_attachments && has_work_on_input_markers(text)) ||
      has_enumerated_steps(contract.objective) ||
      (has_execution_tools && detail::count_runes(contract.objective) >= 120 &&
       has_sequence_markers(text));

  contract.require_tool_evidence =
      has_execution_tools &&
      (file_intent || has_attachments || complex_signals || has_evidence_markers(text));

  if (input.force_plan || complex_signals) {
    contract.complexity = task_complexity::complex;
  } else if (has_attachments || file_intent || contract.mode == output_mode::json ||
             contract.require_tool_evidence) {
    contract.complexity = task_complexity::normal;
  }
  // Without the plan tool the model could never mark an item done, so a plan it cannot
  // update is never required.
  contract.require_plan = input.force_plan || (contract.complexity == task_complexity::complex &&
                                               !input.sub_agent && has_plan_tool);

  contract.tools.allowed = input.agent_tools;
  for (const auto& tool : input.blocked_tools) {
    add_unique(contract.tools.blocked, tool);
  }
  add_forbidden_tools(text, input.agent_tools, contract.tools.blocked);

  contract.max_correction_attempts = input.max_correction_attempts < 0
                                         ? default_correction_attempts
                                         : input.max_correction_attempts;
  return contract;
}

} // namespace troupe::harness
