// Starting a coroutine whose failure must not vanish: every co_spawn in the agent
// and the controller goes through spawn_task, so an exception that escapes a task
// reaches the one place that turns it into the run's failure (instead of being
// dropped, as asio::detached does).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <exception>
#include <string>
#include <utility>

namespace tw::net {

// The message of an exception_ptr ("unknown error" for a non-std exception).
std::string what_of(const std::exception_ptr& e);

// Runs `task` on `ex`; if it ends with an exception, calls on_failure(message)
// (on the task's executor). Cancellation (operation_aborted) is not a failure.
template <typename Executor, typename OnFailure>
void spawn_task(Executor&& ex, boost::asio::awaitable<void> task, OnFailure on_failure) {
  boost::asio::co_spawn(std::forward<Executor>(ex), std::move(task),
                        [on_failure = std::move(on_failure)](std::exception_ptr e) mutable {
                          if (e) on_failure(what_of(e));
                        });
}

}  // namespace tw::net
