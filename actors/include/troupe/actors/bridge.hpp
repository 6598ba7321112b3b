#pragma once

/// \file
/// The CAF <-> Asio bridge, the only place actors and coroutines meet (design.md):
/// - `start_io`: an actor starts a coroutine on an io executor and gets its result back
///   as a message, handled in the actor's own context;
/// - `ask`: a coroutine sends an actor a request with a timeout and resumes on its own
///   executor with the answer, a timeout, or the news that the actor died.

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <caf/all.hpp>
#include <fmt/format.h>

#include "troupe/actors/shard_scheduler.hpp"
#include "troupe/runtime/error.hpp"

namespace troupe::actors {

namespace asio = boost::asio;

/// Tags the message that carries an I/O completion back into an actor.
using io_done_atom = caf::atom_constant<caf::atom("io_done")>;

/// The continuation of an I/O operation, run inside the actor that started it.
struct io_completion {
  std::function<void()> resume;
};

/// The handler every actor that calls `start_io` must include in its behavior.
inline auto handle_io_completion() {
  return [](io_done_atom, io_completion& done) {
    if (done.resume) {
      done.resume();
    }
  };
}

/// For typed actors: the signature entry matching `handle_io_completion()`. A typed actor
/// that calls `start_io` lists it in its interface (else `start_io` does not compile).
using io_completion_handler = caf::reacts_to<io_done_atom, io_completion>;

/// Converts a CAF error into troupe's vocabulary (timeout, unavailable, …); an error made
/// by `to_caf_error` comes back with its own code and message.
error from_caf_error(const caf::error& e);

/// Carries a troupe error through CAF (a response promise, a request's error handler), so
/// that the asker gets its code and message back from `from_caf_error`.
caf::error to_caf_error(const error& e);

/// A running I/O operation started by `start_io`; `cancel` asks it to stop.
class io_task {
public:
  io_task() = default;
  io_task(asio::any_io_executor executor, std::shared_ptr<asio::cancellation_signal> signal)
      : executor_(std::move(executor)), signal_(std::move(signal)) {}

  /// Requests cancellation; the completion still arrives (usually as `cancelled`).
  /// Thread-safe: the signal is emitted on the operation's executor.
  void cancel() const {
    if (signal_) {
      asio::post(executor_,
                 [signal = signal_] { signal->emit(asio::cancellation_type::terminal); });
    }
  }

private:
  asio::any_io_executor executor_;
  std::shared_ptr<asio::cancellation_signal> signal_;
};

namespace detail {

template <class T> expected<T> failure_from(std::exception_ptr ep) {
  try {
    std::rethrow_exception(ep);
  } catch (const boost::system::system_error& e) {
    if (e.code() == asio::error::operation_aborted) {
      return fail(errc::cancelled, "the I/O operation was cancelled");
    }
    return fail(errc::io_error, e.what());
  } catch (const std::exception& e) {
    return fail(errc::internal, fmt::format("I/O coroutine failed: {}", e.what()));
  } catch (...) {
    return fail(errc::internal, "I/O coroutine failed with a non-standard exception");
  }
}

} // namespace detail

/// Runs `op` on `io` and calls `on_done(expected<T>)` inside `self`'s context when it
/// finishes (an exception becomes an error). `self`'s behavior must include
/// `handle_io_completion()`; a typed `self` must also list `io_completion_handler` in
/// its interface. If `self` is gone by then, the result is dropped.
template <class T, class Actor, class OnDone>
io_task start_io(Actor* self, asio::any_io_executor io, asio::awaitable<T> op, OnDone on_done) {
  if constexpr (!std::is_same_v<typename Actor::signatures, caf::none_t>) {
    static_assert(
        caf::detail::tl_contains<typename Actor::signatures, io_completion_handler>::value,
        "a typed actor that calls start_io needs io_completion_handler in its interface");
  }
  // Untyped on purpose: the completion is checked against the interface above.
  auto target = caf::actor_cast<caf::actor>(self);
  // The completion handler owns a reference to the signal: the coroutine's slot points
  // into it for as long as the coroutine runs, whether or not the io_task is kept.
  auto signal = std::make_shared<asio::cancellation_signal>();
  auto deliver = [target](std::function<void()> resume) {
    caf::anon_send(target, io_done_atom::value, io_completion{std::move(resume)});
  };
  if constexpr (std::is_void_v<T>) {
    asio::co_spawn(io, std::move(op),
                   asio::bind_cancellation_slot(
                       signal->slot(), [deliver, signal, on_done = std::move(on_done)](
                                           std::exception_ptr ep) mutable {
                         auto result = ep ? detail::failure_from<void>(ep) : expected<void>{};
                         auto shared = std::make_shared<std::pair<OnDone, expected<void>>>(
                             std::move(on_done), std::move(result));
                         deliver([shared] { shared->first(std::move(shared->second)); });
                       }));
  } else {
    asio::co_spawn(io, std::move(op),
                   asio::bind_cancellation_slot(
                       signal->slot(), [deliver, signal, on_done = std::move(on_done)](
                                           std::exception_ptr ep, T value) mutable {
                         auto result =
                             ep ? detail::failure_from<T>(ep) : expected<T>(std::move(value));
                         auto shared = std::make_shared<std::pair<OnDone, expected<T>>>(
                             std::move(on_done), std::move(result));
                         deliver([shared] { shared->first(std::move(shared->second)); });
                       }));
  }
  return io_task(std::move(io), std::move(signal));
}

namespace detail {

/// Completes an `ask` exactly once, from whichever of answer, error, actor death or
/// cancellation comes first, by posting to the waiting coroutine's executor.
template <class R, class Handler> class ask_completion {
public:
  ask_completion(Handler handler, asio::any_io_executor executor)
      : handler_(std::move(handler)), executor_(std::move(executor)) {}

  ~ask_completion() {
    // The helper actor vanished without an answer (actor system going down).
    complete(fail(errc::unavailable, "the actor system stopped before the actor answered"));
  }

  void complete(expected<R> result) {
    if (done_.exchange(true)) {
      return;
    }
    asio::post(executor_, [handler = std::move(handler_), result = std::move(result)]() mutable {
      auto slot = asio::get_associated_cancellation_slot(handler);
      if (slot.is_connected()) {
        slot.clear();
      }
      std::move(handler)(std::move(result));
    });
  }

private:
  Handler handler_;
  asio::any_io_executor executor_;
  std::atomic<bool> done_{false};
};

} // namespace detail

/// Sends `dest` a request and waits, without blocking a thread, for its answer of type
/// `R`. Fails with `timeout` after `timeout`, with `unavailable` as soon as `dest` dies
/// (even if it had taken the request), and with `cancelled` if the awaiting coroutine
/// is cancelled. Resumes on the awaiting coroutine's executor.
template <class R, class Handle, class Rep, class Period, class... Ts>
asio::awaitable<expected<R>> ask(caf::actor_system& system, Handle dest,
                                 std::chrono::duration<Rep, Period> timeout, Ts... args) {
  const auto span = std::chrono::duration_cast<caf::timespan>(timeout);
  auto initiate = [&system, dest, span, args...](auto handler) mutable {
    using handler_type = decltype(handler);
    auto executor = asio::get_associated_executor(handler);
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto once =
        std::make_shared<detail::ask_completion<R, handler_type>>(std::move(handler), executor);
    if (slot.is_connected()) {
      slot.assign([weak = std::weak_ptr(once)](asio::cancellation_type) {
        if (auto o = weak.lock()) {
          o->complete(fail(errc::cancelled, "the request was cancelled"));
        }
      });
    }
    if (!dest) {
      once->complete(fail(errc::unavailable, "no actor to ask (invalid handle)"));
      return;
    }
    system.spawn([once, dest, span, args...](homed<caf::event_based_actor>* self) mutable {
      self->monitor(dest);
      self->set_down_handler([once, self](caf::down_msg& msg) {
        once->complete(fail(errc::unavailable, fmt::format("the actor died before answering ({})",
                                                           caf::to_string(msg.reason))));
        self->quit();
      });
      // The monitor is removed once the answer (or the error) is in: a monitor left on a
      // long-lived actor (the store writer, a conversation) keeps this helper's memory
      // until that actor dies, some 370 bytes per ask (the residue issue 13 measures).
      self->request(dest, span, std::move(args)...)
          .then(
              [once, self, dest](R& answer) {
                self->demonitor(dest.address());
                once->complete(std::move(answer));
                self->quit();
              },
              [once, self, dest](caf::error& e) {
                self->demonitor(dest.address());
                once->complete(tl::unexpected(from_caf_error(e)));
                self->quit();
              });
    });
  };
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>, void(expected<R>)>(
      std::move(initiate), asio::use_awaitable);
}

} // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::io_completion)
