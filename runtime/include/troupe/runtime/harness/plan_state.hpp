#pragma once

/// \file
/// The run's plan: ordered items with a status each, at most one running at a time,
/// changed by the `plan` tool (set, update, revise, read) and bootstrapped from a
/// template when the contract requires a plan. Rendered into the prompt as a
/// `<plan_state>` block.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "troupe/runtime/error.hpp"
#include "troupe/runtime/harness/task_contract.hpp"

namespace troupe::harness {

/// Where an item stands.
enum class plan_status { pending, running, completed, blocked, failed, skipped };

std::string_view to_string(plan_status s) noexcept;
/// Parses "pending", "running" (or "in_progress"), "completed" (or "done"), "blocked",
/// "failed", "skipped".
expected<plan_status> parse_plan_status(std::string_view name);
/// Completed, blocked, failed and skipped are terminal: nothing more will happen to the
/// item in this run, and the final answer may report it.
bool is_terminal(plan_status s) noexcept;

/// One step of the plan.
struct plan_item {
  std::string id;
  std::string title;
  std::string detail;
  plan_status status = plan_status::pending;
  /// Why the item is blocked, failed or skipped (required for those), or a note.
  std::string reason;

  friend bool operator==(const plan_item&, const plan_item&) = default;
};

/// An item as the model sends it: the status may be left out (pending for a new item,
/// unchanged for an existing one on revise).
struct plan_item_spec {
  std::string id;
  std::string title;
  std::string detail;
  std::optional<plan_status> status;
  std::string reason;
};

/// Who wrote the current item list.
enum class plan_source {
  /// No plan yet.
  none,
  /// The harness bootstrapped it from the template; the model has not rewritten it.
  harness,
  /// The model set or revised it.
  model,
};

/// The plan of one run. Every operation either applies completely or fails with an
/// `invalid_argument` / `not_found` / `conflict` error whose message the model can act
/// on; a failed operation leaves the plan unchanged.
class plan_state {
public:
  /// Most items a plan may hold; longer plans are a model running away.
  static constexpr std::size_t max_items = 50;

  /// Replaces the plan. Items without an id get "1", "2", …; ids must be unique, titles
  /// non-empty, and at most one item may be running.
  expected<void> set(std::vector<plan_item_spec> items);
  /// Changes one item's status (and reason). Marking an item running while another runs
  /// is refused; blocked, failed and skipped need a reason.
  expected<void> update(std::string_view id, plan_status status, std::string reason = {});
  /// Replaces the item list of an existing plan, keeping the status of items whose id
  /// survives when the spec leaves the status out.
  expected<void> revise(std::vector<plan_item_spec> items);
  /// The items, in order.
  const std::vector<plan_item>& items() const noexcept {
    return items_;
  }

  bool empty() const noexcept {
    return items_.empty();
  }
  plan_source source() const noexcept {
    return source_;
  }
  /// The running item, or nullptr.
  const plan_item* running() const noexcept;
  const plan_item* find(std::string_view id) const noexcept;
  /// True when the plan has items and every one is terminal.
  bool all_terminal() const noexcept;
  /// True when every item is terminal, except that the last item may still be an open
  /// delivery step ("deliver", "final answer"): the final answer is that step's output.
  bool ready_for_final_answer() const noexcept;
  /// Number of terminal items.
  std::size_t terminal_count() const noexcept;

  /// The `<plan_state>` block for the prompt; empty when there is no plan.
  std::string render() const;

  /// The bootstrap plan for a contract that requires one: understand, execute,
  /// validate (when the contract has checks to run) and deliver; empty otherwise.
  static plan_state bootstrap(const task_contract& contract);

private:
  expected<std::vector<plan_item>> build(std::vector<plan_item_spec> specs, bool revising) const;

  std::vector<plan_item> items_;
  plan_source source_ = plan_source::none;
};

} // namespace troupe::harness
