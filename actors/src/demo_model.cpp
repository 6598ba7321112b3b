#include "troupe/actors/demo_model.hpp"

namespace troupe::actors {

std::string_view demo_model_script() noexcept {
  // Rules are tried in order. Every text answer says it is canned.
  return R"json([
  {"match": {"has_tool_result": true},
   "reply": {"text": "[scripted demo] The tool ran and its output is above. This answer is canned by troupe's built-in demo model (mock-llm), not written by an LLM. Set OPENAI_API_KEY (and optionally OPENAI_BASE_URL and TROUPE_MODEL) before `make run` to talk to a real model."}},
  {"match": {"user": "python"},
   "reply": {"tool_calls": [{"name": "code_interpreter",
                             "arguments": {"language": "python", "code": "print(sum(range(1, 101)))"}}]}},
  {"match": {"user": "file"},
   "reply": {"tool_calls": [{"name": "write",
                             "arguments": {"path": "hello.md", "content": "# Hello from troupe\n\nWritten by the scripted demo model.\n"}}]}},
  {"reply": {"text": "[scripted demo] Hello from troupe. This reply is canned by the built-in demo model (mock-llm), not written by an LLM. Ask me to run python or to write a file to see tools at work, or set OPENAI_API_KEY to use a real model."}}
])json";
}

} // namespace troupe::actors
