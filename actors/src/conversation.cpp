#include "troupe/actors/conversation.hpp"

#include <deque>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "troupe/actors/bridge.hpp"
#include "troupe/storage/repositories.hpp"
#include "troupe/storage/write_op.hpp"

namespace troupe::actors {

namespace {

using idle_atom = caf::atom_constant<caf::atom("idle")>;
using started_atom = caf::atom_constant<caf::atom("started")>;

constexpr auto write_timeout = std::chrono::seconds(30);
// How long a conversation waits for a run beyond the run's own deadline.
constexpr auto run_grace = std::chrono::seconds(30);

/// A message waiting for its run, with everyone who waits for its answer.
struct pending_turn {
  std::string text;
  std::vector<caf::response_promise> waiting;
};

struct conversation_state {
  conversation_spec spec;
  std::vector<chat_message> history;
  std::vector<caf::actor> subscribers;
  caf::actor current;
  pending_turn current_turn;
  std::deque<pending_turn> queue;
  std::uint64_t activity = 0;
  std::uint64_t turns = 0;
};

using conversation_actor = caf::stateful_actor<conversation_state>;

void start_next(conversation_actor* self);

void remember(conversation_actor* self, chat_message m) {
  auto& st = self->state;
  st.history.push_back(std::move(m));
  if (st.history.size() > st.spec.history_limit) {
    st.history.erase(st.history.begin(),
                     st.history.begin() +
                         static_cast<std::ptrdiff_t>(st.history.size() - st.spec.history_limit));
  }
}

void schedule_idle(conversation_actor* self) {
  auto& st = self->state;
  ++st.activity;
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(st.spec.idle_ttl),
                     idle_atom::value, st.activity);
}

void on_run_done(conversation_actor* self, run_result result) {
  auto& st = self->state;
  if (result.status == storage::run_status::succeeded) {
    remember(self, chat_message{chat_role::user, st.current_turn.text, {}, {}, {}});
    remember(self, chat_message{chat_role::assistant, result.text, {}, {}, {}});
  }
  for (auto& waiting : st.current_turn.waiting) {
    waiting.deliver(result);
  }
  st.current = caf::actor{};
  st.current_turn = {};
  if (!st.queue.empty()) {
    start_next(self);
  } else {
    schedule_idle(self);
  }
}

void launch(conversation_actor* self, storage::row_id run_row) {
  auto& st = self->state;
  run_spec spec;
  spec.run_id = fmt::format("{}.run{}", st.spec.id, st.turns);
  spec.turn_id = fmt::format("{}.turn{}", st.spec.id, st.turns);
  spec.run_row = run_row;
  spec.conversation_row = st.spec.conversation_row;
  spec.agent = st.spec.agent;
  spec.provider = st.spec.provider;
  spec.history = st.history;
  spec.objective = st.current_turn.text;
  spec.workspace = st.spec.workspace;
  spec.tool_timeout = st.spec.tool_timeout;
  spec.io = st.spec.io;
  st.current = spawn_run(self->system(), std::move(spec), caf::actor_cast<caf::actor>(self));
  const auto limit = std::chrono::duration_cast<caf::timespan>(st.spec.agent.timeout) +
                     std::chrono::duration_cast<caf::timespan>(run_grace);
  self->request(st.current, limit, run_atom::value)
      .then([self](run_result& r) { on_run_done(self, std::move(r)); },
            [self](caf::error& e) {
              // A crashed or hung run fails its turn; the conversation goes on.
              run_result r;
              r.status = storage::run_status::failed;
              r.error =
                  fmt::format("the run ended without a result: {}", from_caf_error(e).message);
              on_run_done(self, std::move(r));
            });
}

void start_next(conversation_actor* self) {
  auto& st = self->state;
  st.current_turn = std::move(st.queue.front());
  st.queue.pop_front();
  ++st.turns;
  ++st.activity;
  // Marks the conversation busy until the run exists (the run row is written first).
  st.current = caf::actor_cast<caf::actor>(self);
  auto& writer = st.spec.io.writer;
  if (!writer || st.spec.conversation_row == 0) {
    launch(self, 0);
    return;
  }
  storage::run_record row;
  row.uuid = fmt::format("{}.run{}", st.spec.id, st.turns);
  row.conversation_id = st.spec.conversation_row;
  row.agent_id = st.spec.agent_row;
  row.model = st.spec.agent.model;
  row.created_at = unix_millis_now();
  self->request(
          *writer, write_timeout, write_atom::value,
          storage::make_write(
              "insert run", [row](storage::connection& c) { return storage::insert_run(c, row); }))
      .then([self](write_result& id) { launch(self, id ? *id : 0); },
            [self](caf::error&) { launch(self, 0); });
}

caf::behavior conversation_behavior(conversation_actor* self, conversation_spec spec) {
  self->state.spec = std::move(spec);
  schedule_idle(self);
  // Told to exit (shutdown): cancel the active run, so it ends now rather than at its
  // deadline (an actor system waits for every actor before it stops).
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (self->state.current) {
      self->send(self->state.current, cancel_atom::value);
    }
    self->quit(msg.reason);
  });
  return {
      [self](send_atom, std::string& text) -> caf::result<run_result> {
        auto& st = self->state;
        ++st.activity;
        auto promise = self->make_response_promise();
        if (!st.current) {
          st.queue.push_back(pending_turn{std::move(text), {promise}});
          start_next(self);
          return caf::delegated<run_result>{};
        }
        // While the run row is being written there is no run to steer or interrupt yet.
        const bool run_exists = st.current != caf::actor_cast<caf::actor>(self);
        const auto policy = run_exists ? st.spec.agent.queue : queue_policy::followup;
        switch (policy) {
          case queue_policy::followup:
            st.queue.push_back(pending_turn{std::move(text), {promise}});
            break;
          case queue_policy::collect:
            if (st.queue.empty()) {
              st.queue.push_back(pending_turn{std::move(text), {promise}});
            } else {
              st.queue.back().text += "\n\n" + text;
              st.queue.back().waiting.push_back(promise);
            }
            break;
          case queue_policy::steer:
            // Answered with the result of the run it steered.
            st.current_turn.text += "\n\n" + text;
            st.current_turn.waiting.push_back(promise);
            self->send(st.current, steer_atom::value, std::move(text));
            break;
          case queue_policy::interrupt:
            st.queue.push_front(pending_turn{std::move(text), {promise}});
            self->send(st.current, cancel_atom::value);
            break;
        }
        return caf::delegated<run_result>{};
      },
      [self](subscribe_atom, caf::actor& subscriber) {
        self->state.subscribers.push_back(std::move(subscriber));
      },
      [self](event_atom, run_event& e) {
        for (const auto& s : self->state.subscribers) {
          self->send(s, event_atom::value, e);
        }
      },
      [self](idle_atom, std::uint64_t generation) {
        auto& st = self->state;
        if (generation == st.activity && !st.current && st.queue.empty()) {
          self->quit();
        }
      },
  };
}

struct shard_state {
  conversation_factory factory;
  std::map<std::string, caf::actor, std::less<>> live;
};

caf::behavior registry_shard(caf::stateful_actor<shard_state>* self, conversation_factory factory) {
  self->state.factory = std::move(factory);
  // On shutdown, live conversations go with their shard.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    for (const auto& [id, conversation] : self->state.live) {
      self->send_exit(conversation, msg.reason);
    }
    self->quit(msg.reason);
  });
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& live = self->state.live;
    for (auto it = live.begin(); it != live.end(); ++it) {
      if (it->second.address() == msg.source) {
        live.erase(it);
        break;
      }
    }
  });
  return {
      [self](get_atom, const std::string& id) -> caf::actor {
        auto& live = self->state.live;
        if (auto it = live.find(id); it != live.end()) {
          return it->second;
        }
        // Creation happens here, one message at a time: a second request for the same
        // id finds the actor the first one created.
        auto conversation = self->state.factory(self->system(), id);
        if (conversation) {
          self->monitor(conversation);
          live.emplace(id, conversation);
        }
        return conversation;
      },
  };
}

} // namespace

caf::actor spawn_conversation(caf::actor_system& system, conversation_spec spec) {
  return system.spawn(conversation_behavior, std::move(spec));
}

conversation_registry::conversation_registry(caf::actor_system& system,
                                             conversation_factory factory, std::size_t shards) {
  if (shards == 0) {
    shards = 1;
  }
  for (std::size_t i = 0; i < shards; ++i) {
    shards_.push_back(system.spawn(registry_shard, factory));
  }
}

void conversation_registry::stop() {
  for (const auto& shard : shards_) {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
}

const caf::actor& conversation_registry::shard_for(std::string_view id) const {
  return shards_[std::hash<std::string_view>{}(id) % shards_.size()];
}

} // namespace troupe::actors
