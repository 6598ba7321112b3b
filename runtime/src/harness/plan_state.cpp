#include "troupe/runtime/harness/plan_state.hpp"

#include <algorithm>

#include "harness/text.hpp"

namespace troupe::harness {

namespace {

bool needs_reason(plan_status s) noexcept {
  return s == plan_status::blocked || s == plan_status::failed || s == plan_status::skipped;
}

std::string quoted(std::string_view id) {
  return "'" + std::string(id) + "'";
}

std::string id_list(const std::vector<plan_item>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) {
      out += ", ";
    }
    out += item.id;
  }
  return out;
}

bool is_delivery_item(const plan_item& item) {
  const auto id = detail::fold(detail::trim(item.id));
  if (id == "deliver" || id == "final" || id == "final_answer" || id == "final-answer") {
    return true;
  }
  return detail::contains_any(detail::fold(item.title),
                              {"deliver", "final answer", "final response", "交付", "最终答复",
                               "最终回答", "最终回复", "汇总结果", "输出结果", "输出最终"});
}

} // namespace

std::string_view to_string(plan_status s) noexcept {
  switch (s) {
    case plan_status::pending:
      return "pending";
    case plan_status::running:
      return "running";
    case plan_status::completed:
      return "completed";
    case plan_status::blocked:
      return "blocked";
    case plan_status::failed:
      return "failed";
    case plan_status::skipped:
      return "skipped";
  }
  return "pending";
}

expected<plan_status> parse_plan_status(std::string_view name) {
  const auto folded = detail::fold(detail::trim(name));
  if (folded == "pending") {
    return plan_status::pending;
  }
  if (folded == "running" || folded == "in_progress") {
    return plan_status::running;
  }
  if (folded == "completed" || folded == "done") {
    return plan_status::completed;
  }
  if (folded == "blocked") {
    return plan_status::blocked;
  }
  if (folded == "failed") {
    return plan_status::failed;
  }
  if (folded == "skipped") {
    return plan_status::skipped;
  }
  return fail(errc::invalid_argument,
              "unknown plan status '" + std::string(name) +
                  "'; use one of pending, running, completed, blocked, failed, skipped");
}

bool is_terminal(plan_status s) noexcept {
  return s == plan_status::completed || s == plan_status::blocked || s == plan_status::failed ||
         s == plan_status::skipped;
}

expected<std::vector<plan_item>> plan_state::build(std::vector<plan_item_spec> specs,
                                                   bool revising) const {
  if (specs.empty()) {
    return fail(errc::invalid_argument, "a plan needs at least one item");
  }
  if (specs.size() > max_items) {
    return fail(errc::limit_exceeded, "a plan holds at most " + std::to_string(max_items) +
                                          " items; merge steps into fewer items");
  }
  std::vector<plan_item> items;
  items.reserve(specs.size());
  // Index, not pointer: `items` grows in the loop.
  std::optional<std::size_t> running_index;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto& spec = specs[i];
    plan_item item;
    item.id = std::string(detail::trim(spec.id));
    if (item.id.empty()) {
      item.id = std::to_string(i + 1);
    }
    item.title = std::string(detail::trim(spec.title));
    item.detail = std::move(spec.detail);
    item.reason = std::move(spec.reason);
    if (item.title.empty()) {
      return fail(errc::invalid_argument,
                  "plan item " + quoted(item.id) + " has no title; give every item a title");
    }
    if (std::any_of(items.begin(), items.end(),
                    [&](const plan_item& o) { return o.id == item.id; })) {
      return fail(errc::invalid_argument,
                  "plan item id " + quoted(item.id) + " is used twice; ids must be unique");
    }
    const plan_item* previous = revising ? find(item.id) : nullptr;
    if (spec.status) {
      item.status = *spec.status;
    } else if (previous != nullptr) {
      item.status = previous->status;
      if (item.reason.empty()) {
        item.reason = previous->reason;
      }
    }
    if (needs_reason(item.status) && detail::trim(item.reason).empty()) {
      return fail(errc::invalid_argument, "plan item " + quoted(item.id) + " is " +
                                              std::string(to_string(item.status)) +
                                              " but has no reason; say why");
    }
    items.push_back(std::move(item));
    if (items.back().status == plan_status::running) {
      if (running_index) {
        return fail(errc::conflict, "plan items " + quoted(items[*running_index].id) + " and " +
                                        quoted(items.back().id) +
                                        " are both running; exactly one item may run at a time");
      }
      running_index = items.size() - 1;
    }
  }
  return items;
}

expected<void> plan_state::set(std::vector<plan_item_spec> items) {
  auto built = build(std::move(items), false);
  if (!built) {
    return tl::unexpected(built.error());
  }
  items_ = std::move(*built);
  source_ = plan_source::model;
  return {};
}

expected<void> plan_state::revise(std::vector<plan_item_spec> items) {
  if (items_.empty()) {
    return fail(errc::not_found, "there is no plan to revise; create one with action set");
  }
  auto built = build(std::move(items), true);
  if (!built) {
    return tl::unexpected(built.error());
  }
  items_ = std::move(*built);
  source_ = plan_source::model;
  return {};
}

expected<void> plan_state::update(std::string_view id, plan_status status, std::string reason) {
  if (items_.empty()) {
    return fail(errc::not_found, "there is no plan yet; create one with action set");
  }
  const auto wanted = detail::trim(id);
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const plan_item& item) { return item.id == wanted; });
  if (it == items_.end()) {
    return fail(errc::not_found,
                "no plan item " + quoted(wanted) + "; the ids are: " + id_list(items_));
  }
  if (status == plan_status::running) {
    const auto* current = running();
    if (current != nullptr && current->id != it->id) {
      return fail(errc::conflict, "plan item " + quoted(current->id) +
                                      " is still running; mark it completed, blocked, failed "
                                      "or skipped before starting " +
                                      quoted(it->id));
    }
  }
  if (needs_reason(status) && detail::trim(reason).empty()) {
    return fail(errc::invalid_argument, "marking plan item " + quoted(it->id) + " " +
                                            std::string(to_string(status)) +
                                            " needs a reason; say why");
  }
  it->status = status;
  if (!reason.empty() || !needs_reason(status)) {
    it->reason = std::move(reason);
  }
  return {};
}

const plan_item* plan_state::running() const noexcept {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [](const plan_item& item) { return item.status == plan_status::running; });
  return it == items_.end() ? nullptr : &*it;
}

const plan_item* plan_state::find(std::string_view id) const noexcept {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const plan_item& item) { return item.id == id; });
  return it == items_.end() ? nullptr : &*it;
}

bool plan_state::all_terminal() const noexcept {
  return !items_.empty() && std::all_of(items_.begin(), items_.end(), [](const plan_item& item) {
    return is_terminal(item.status);
  });
}

bool plan_state::ready_for_final_answer() const noexcept {
  if (items_.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (is_terminal(items_[i].status)) {
      continue;
    }
    return i + 1 == items_.size() && is_delivery_item(items_[i]);
  }
  return true;
}

std::size_t plan_state::terminal_count() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(items_.begin(), items_.end(),
                    [](const plan_item& item) { return is_terminal(item.status); }));
}

std::string plan_state::render() const {
  if (items_.empty()) {
    return {};
  }
  std::string out = "<plan_state>\nPlan: " + std::to_string(terminal_count()) + " of " +
                    std::to_string(items_.size()) + " items finished";
  if (const auto* current = running()) {
    out += "; running: " + current->id;
  }
  out += ".\n";
  for (const auto& item : items_) {
    out += "- [" + std::string(to_string(item.status)) + "] " + item.id + ": " + item.title;
    if (!item.detail.empty()) {
      out += " — " + item.detail;
    }
    if (!item.reason.empty()) {
      out += " (reason: " + item.reason + ")";
    }
    out += '\n';
  }
  out += "Keep exactly one item running. Mark items completed, blocked, failed or skipped with "
         "the plan tool as you go; the final answer is accepted once every item is finished.\n"
         "</plan_state>";
  return out;
}

plan_state plan_state::bootstrap(const task_contract& contract) {
  plan_state plan;
  if (!contract.require_plan) {
    return plan;
  }
  plan.items_.push_back(
      {"understand", "Understand the goal and what it depends on", "", plan_status::pending, ""});
  plan.items_.push_back({"execute", "Run the necessary tools and collect evidence",
                         "Refine or revise this plan as the work demands.", plan_status::pending,
                         ""});
  if (contract.requires_validation_step()) {
    plan.items_.push_back({"validate", "Check the evidence against the output requirements", "",
                           plan_status::pending, ""});
  }
  plan.items_.push_back({"deliver", "Summarize the results and deliver the final answer", "",
                         plan_status::pending, ""});
  plan.source_ = plan_source::harness;
  return plan;
}

} // namespace troupe::harness
