// Compression planning (issue 16): the split, pruning plan and summary decision for a
// long conversation, without the model call. Target: 1,000 messages in at most 1 ms.

#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "troupe/runtime/prompt/compression.hpp"

namespace {

using namespace troupe;

/// Turns of a question, a tool call, its (long) result and an answer.
std::vector<chat_message> conversation(std::size_t messages) {
  std::vector<chat_message> out;
  for (std::size_t t = 0; out.size() < messages; ++t) {
    const auto id = "call_" + std::to_string(t);
    out.push_back(
        {chat_role::user, "question " + std::to_string(t) + std::string(160, 'q'), {}, {}, {}});
    chat_message call{chat_role::assistant, "", {}, {}, {}};
    call.tool_calls.push_back({id, "read", R"({"file_path":"notes/report.txt"})"});
    out.push_back(std::move(call));
    out.push_back({chat_role::tool, std::string(1200, 'o'), {}, id, "read"});
    out.push_back(
        {chat_role::assistant, "answer " + std::to_string(t) + std::string(300, 'a'), {}, {}, {}});
  }
  out.resize(messages);
  return out;
}

void plan_compression_of_a_long_conversation(benchmark::State& state) {
  const auto history = conversation(static_cast<std::size_t>(state.range(0)));
  prompt::compression_input input;
  input.history = history;
  input.context_window = 128'000;
  for (auto _ : state) {
    auto plan = prompt::plan_compression(input);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

} // namespace

BENCHMARK(plan_compression_of_a_long_conversation)->Arg(1000)->Unit(benchmark::kMicrosecond);
