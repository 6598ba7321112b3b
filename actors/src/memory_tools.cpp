#include "troupe/actors/memory_tools.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "troupe/runtime/crypto.hpp"
#include "troupe/runtime/json_object.hpp"
#include "troupe/runtime/json_writer.hpp"
#include "troupe/runtime/memory_rules.hpp"
#include "troupe/storage/memory.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/search.hpp"
#include "troupe/tools/memory_tool_descriptors.hpp"

namespace troupe::actors {

namespace {

namespace asio = boost::asio;

constexpr std::size_t preview_chars = 200;

void write_item(json_writer& w, const storage::memory_item_record& m) {
  w.begin_object();
  w.key("id").value(m.uuid);
  w.key("scope").value(m.scope);
  w.key("kind").value(m.kind);
  w.key("key").value(m.memory_key);
  w.key("content").value(m.content);
  if (!m.summary.empty()) {
    w.key("summary").value(m.summary);
  }
  w.key("status").value(m.status);
  w.key("pinned").value(m.pinned);
  w.end_object();
}

/// Whether the call's agent may see `m` (the user's own items: scope user, or this
/// agent's agent_user ones).
bool visible(const storage::memory_item_record& m, const tools::tool_context& context) {
  return m.user_id == context.user_row &&
         (m.scope == "user" || (m.agent_id && *m.agent_id == context.agent_row));
}

tools::tool_result bad_arguments(const error& e) {
  return tools::tool_failure("invalid_arguments", e.message);
}

tools::tool_result storage_failure(const error& e) {
  return tools::tool_failure("tool_error", fmt::format("memory is unavailable: {}", e.message));
}

asio::awaitable<tools::tool_result> propose(std::shared_ptr<memory_service> memory,
                                            json_object args, tools::tool_context context) {
  storage::memory_proposal p;
  p.uuid = new_uuid();
  p.user_id = context.user_row;
  if (context.agent_row != 0) {
    p.agent_id = context.agent_row;
  }
  p.actor = fmt::format("run:{}", context.run_id);
  p.active = context.memory_autoapprove;
  if (context.conversation_row != 0) {
    p.conversation_id = context.conversation_row;
  }
  if (context.run_row != 0) {
    p.run_id = context.run_row;
  }
  p.source = "memory tool";
  auto key = args.required_text("key", true);
  auto content = args.required_text("content", true);
  auto kind = args.text("kind");
  auto scope = args.text("scope");
  auto summary = args.text("summary");
  auto importance = args.integer("importance");
  auto sensitivity = args.text("sensitivity");
  for (const auto* failed :
       {key ? nullptr : &key.error(), content ? nullptr : &content.error(),
        kind ? nullptr : &kind.error(), scope ? nullptr : &scope.error(),
        summary ? nullptr : &summary.error(), importance ? nullptr : &importance.error(),
        sensitivity ? nullptr : &sensitivity.error()}) {
    if (failed != nullptr) {
      co_return bad_arguments(*failed);
    }
  }
  p.key = std::move(*key);
  p.content = std::move(*content);
  p.kind = kind->value_or("fact");
  p.scope = scope->value_or("user");
  p.summary = summary->value_or("");
  p.importance = importance->value_or(50);
  p.sensitivity = sensitivity->value_or("normal");
  if (auto valid = storage::validate_proposal(p); !valid) {
    co_return bad_arguments(valid.error());
  }
  storage::memory_change change;
  change.proposal = std::move(p);
  auto writing = memory->write(context.user_row, std::move(change));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return storage_failure(done.error());
  }
  if (done->refusal) {
    co_return tools::tool_failure("policy_blocked",
                                  fmt::format("the memory was refused ({}): {}",
                                              memory::to_string(done->refusal->reason),
                                              done->refusal->message));
  }
  json_writer w;
  w.begin_object().key("ok").value(true);
  w.key("outcome").value(storage::to_string(done->outcome));
  w.key("memory");
  write_item(w, done->item);
  w.end_object();
  co_return tools::tool_result{true, std::move(w).str(), {}, {}};
}

asio::awaitable<tools::tool_result> search(std::shared_ptr<memory_service> memory, json_object args,
                                           tools::tool_context context) {
  auto query = args.text("query");
  auto limit = args.integer("limit");
  if (!query) {
    co_return bad_arguments(query.error());
  }
  if (!limit) {
    co_return bad_arguments(limit.error());
  }
  const auto wanted = std::clamp<std::int64_t>(limit->value_or(tools::session_search_default_limit),
                                               1, tools::session_search_max_limit);
  storage::memory_filter f;
  f.user_id = context.user_row;
  f.query = query->value_or("");
  auto reading =
      memory->read<std::vector<storage::memory_item_record>>([f](storage::connection& c) {
        return storage::list_memories(c, f, storage::page{200, 0});
      });
  auto rows = co_await std::move(reading);
  if (!rows) {
    co_return storage_failure(rows.error());
  }
  json_writer w;
  w.begin_object().key("ok").value(true).key("results").begin_array();
  std::int64_t count = 0;
  for (const auto& m : *rows) {
    if (count >= wanted) {
      break;
    }
    if ((m.status == "active" || m.status == "candidate") && visible(m, context)) {
      write_item(w, m);
      ++count;
    }
  }
  w.end_array().key("count").value(count).end_object();
  co_return tools::tool_result{true, std::move(w).str(), {}, {}};
}

asio::awaitable<tools::tool_result> read_or_forget(std::shared_ptr<memory_service> memory,
                                                   json_object args, tools::tool_context context,
                                                   bool forgetting) {
  auto id = args.required_text("id", true);
  if (!id) {
    co_return bad_arguments(id.error());
  }
  const auto user = context.user_row;
  auto reading =
      memory->read<storage::memory_item_record>([uuid = *id, user](storage::connection& c) {
        return storage::find_memory_by_uuid(c, uuid, user);
      });
  auto item = co_await std::move(reading);
  if (!item || !visible(*item, context) || item->status == "deleted") {
    if (item || item.error().code == errc::not_found) {
      co_return tools::tool_failure("not_found", fmt::format("no memory with id {}", *id));
    }
    co_return storage_failure(item.error());
  }
  json_writer w;
  w.begin_object().key("ok").value(true);
  if (!forgetting) {
    w.key("memory");
    write_item(w, *item);
    w.end_object();
    co_return tools::tool_result{true, std::move(w).str(), {}, {}};
  }
  storage::memory_change change;
  change.what = storage::memory_change::action::forget;
  change.patch.id = item->id;
  change.patch.user_id = user;
  change.patch.actor = fmt::format("run:{}", context.run_id);
  auto writing = memory->write(user, std::move(change));
  auto done = co_await std::move(writing);
  if (!done) {
    co_return storage_failure(done.error());
  }
  w.key("outcome").value(storage::to_string(done->outcome));
  w.key("memory");
  write_item(w, done->item);
  w.end_object();
  co_return tools::tool_result{true, std::move(w).str(), {}, {}};
}

class memory_tool final : public tools::tool {
public:
  explicit memory_tool(std::shared_ptr<memory_service> memory) : memory_(std::move(memory)) {}

  const tools::tool_descriptor& descriptor() const noexcept override {
    return tools::memory_tool_descriptor();
  }

  asio::awaitable<tools::tool_result> invoke(std::string arguments,
                                             tools::tool_context context) const override {
    return run(memory_, std::move(arguments), std::move(context));
  }

private:
  static asio::awaitable<tools::tool_result>
  run(std::shared_ptr<memory_service> memory, std::string arguments, tools::tool_context context) {
    if (context.user_row == 0) {
      co_return tools::tool_failure("permission_denied",
                                    "memory needs a conversation owned by a user");
    }
    auto args = json_object::parse(arguments, {"arguments", "arguments.", true, true});
    if (!args) {
      co_return bad_arguments(args.error());
    }
    auto action = args->required_text("action", true);
    if (!action) {
      co_return bad_arguments(action.error());
    }
    if (*action == "propose") {
      co_return co_await propose(std::move(memory), std::move(*args), std::move(context));
    }
    if (*action == "search") {
      co_return co_await search(std::move(memory), std::move(*args), std::move(context));
    }
    if (*action == "read" || *action == "forget") {
      const bool forgetting = *action == "forget";
      co_return co_await read_or_forget(std::move(memory), std::move(*args), std::move(context),
                                        forgetting);
    }
    co_return tools::tool_failure("invalid_arguments",
                                  "arguments.action: must be propose, search, read or forget");
  }

  std::shared_ptr<memory_service> memory_;
};

/// One conversation of the user with a preview of its last message.
struct recent_session {
  storage::conversation_record conversation;
  std::string preview;
};

class session_search_tool final : public tools::tool {
public:
  explicit session_search_tool(std::shared_ptr<memory_service> memory)
      : memory_(std::move(memory)) {}

  const tools::tool_descriptor& descriptor() const noexcept override {
    return tools::session_search_tool_descriptor();
  }

  asio::awaitable<tools::tool_result> invoke(std::string arguments,
                                             tools::tool_context context) const override {
    return run(memory_, std::move(arguments), std::move(context));
  }

private:
  static asio::awaitable<tools::tool_result>
  run(std::shared_ptr<memory_service> memory, std::string arguments, tools::tool_context context) {
    if (context.user_row == 0) {
      co_return tools::tool_failure("permission_denied",
                                    "session_search needs a conversation owned by a user");
    }
    auto args = json_object::parse(arguments, {"arguments", "arguments.", true, true});
    if (!args) {
      co_return bad_arguments(args.error());
    }
    auto query = args->text("query");
    auto limit = args->integer("limit");
    if (!query) {
      co_return bad_arguments(query.error());
    }
    if (!limit) {
      co_return bad_arguments(limit.error());
    }
    const auto wanted = std::clamp<std::int64_t>(
        limit->value_or(tools::session_search_default_limit), 1, tools::session_search_max_limit);
    const auto text = query->value_or("");
    const auto user = context.user_row;
    json_writer w;
    w.begin_object();
    if (storage::query_terms(text).empty()) {
      auto reading = memory->read<std::vector<recent_session>>(
          [user, wanted](storage::connection& c) -> expected<std::vector<recent_session>> {
            auto conversations = storage::list_conversations(c, user, wanted);
            if (!conversations) {
              return tl::unexpected(conversations.error());
            }
            std::vector<recent_session> out;
            for (auto& conv : *conversations) {
              auto last = storage::list_messages(c, conv.id, 1);
              if (!last) {
                return tl::unexpected(last.error());
              }
              std::string preview = last->empty()
                                        ? std::string()
                                        : memory::cut_chars(last->back().content, preview_chars);
              out.push_back({std::move(conv), std::move(preview)});
            }
            return out;
          });
      auto sessions = co_await std::move(reading);
      if (!sessions) {
        co_return storage_failure(sessions.error());
      }
      w.key("mode").value("recent").key("query").value(text).key("results").begin_array();
      for (const auto& s : *sessions) {
        w.begin_object();
        w.key("conversation_id").value(s.conversation.uuid);
        w.key("title").value(s.conversation.title);
        w.key("updated_at").value(s.conversation.updated_at);
        w.key("preview").value(s.preview);
        w.end_object();
      }
      w.end_array().key("count").value(sessions->size()).end_object();
      co_return tools::tool_result{true, std::move(w).str(), {}, {}};
    }
    storage::search_query q;
    q.owner_user_id = user;
    q.text = text;
    q.limit = wanted;
    auto searching = memory->search_messages(q);
    auto hits = co_await std::move(searching);
    if (!hits) {
      co_return storage_failure(hits.error());
    }
    w.key("mode").value("search").key("query").value(text).key("results").begin_array();
    for (const auto& h : *hits) {
      w.begin_object();
      w.key("conversation_id").value(h.conversation_uuid);
      w.key("message_id").value(h.message_id);
      w.key("role").value(h.role);
      w.key("snippet").value(h.snippet);
      w.key("created_at").value(h.created_at);
      w.end_object();
    }
    w.end_array().key("count").value(hits->size()).end_object();
    co_return tools::tool_result{true, std::move(w).str(), {}, {}};
  }

  std::shared_ptr<memory_service> memory_;
};

} // namespace

std::shared_ptr<const tools::tool> make_memory_tool(std::shared_ptr<memory_service> memory) {
  return std::make_shared<memory_tool>(std::move(memory));
}

std::shared_ptr<const tools::tool>
make_session_search_tool(std::shared_ptr<memory_service> memory) {
  return std::make_shared<session_search_tool>(std::move(memory));
}

std::shared_ptr<tools::dynamic_tool_source>
make_memory_tool_source(std::shared_ptr<memory_service> memory) {
  auto source = std::make_shared<tools::dynamic_tool_source>(std::string(memory_source_name));
  (void)source->add(make_memory_tool(memory));
  (void)source->add(make_session_search_tool(std::move(memory)));
  return source;
}

} // namespace troupe::actors
