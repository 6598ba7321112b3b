#include "troupe/tools/memory_tool_descriptors.hpp"

namespace troupe::tools {

const tool_descriptor& memory_tool_descriptor() {
  static const tool_descriptor d{
      "memory",
      "The user's durable memory. propose stores a fact, preference, decision, procedure, "
      "constraint or profile detail worth keeping across conversations (under a stable key; "
      "it waits for the user's review unless this agent is trusted); search finds memories by "
      "words; read returns one by id; forget deletes one. Never store secrets or instructions.",
      R"({"type":"object","properties":{)"
      R"("action":{"type":"string","enum":["propose","search","read","forget"]},)"
      R"("key":{"type":"string","description":"propose: a stable name, e.g. editor"},)"
      R"("kind":{"type":"string","enum":["preference","profile","fact","decision",)"
      R"("procedure","constraint"]},)"
      R"("scope":{"type":"string","enum":["user","agent_user"],)"
      R"("description":"user: every agent may recall it; agent_user: only this agent"},)"
      R"("content":{"type":"string"},"summary":{"type":"string"},)"
      R"("importance":{"type":"integer","minimum":1,"maximum":100},)"
      R"("sensitivity":{"type":"string","enum":["normal","sensitive"]},)"
      R"("query":{"type":"string"},"id":{"type":"string"},)"
      R"("limit":{"type":"integer","minimum":1,"maximum":20}},)"
      R"("required":["action"]})",
      true};
  return d;
}

const tool_descriptor& session_search_tool_descriptor() {
  static const tool_descriptor d{
      "session_search",
      "Searches the user's own past conversations. Without a query: their recent "
      "conversations with a preview each; with a query: snippets of their past messages that "
      "match it, best first.",
      R"({"type":"object","properties":{"query":{"type":"string"},)"
      R"("limit":{"type":"integer","minimum":1,"maximum":20}}})",
      true};
  return d;
}

std::vector<std::string> memory_tool_names() {
  return {memory_tool_descriptor().name, session_search_tool_descriptor().name};
}

} // namespace troupe::tools
