// RootTask: the owner of a task a runtime spawns (shared by the simulator and
// the ibv runtime). While the task runs, its frame is registered with the
// runtime (so shutdown can destroy unfinished ones); an exception escaping it
// is handed to the runtime; the frame frees itself when the task finishes.
//
//   RootTask<MyRuntime> r = RunRoot(runtime, std::move(task));  // suspended
//   schedule r.handle ...
//
// Runtime needs AddRoot(void*), RemoveRoot(void*), RecordException(exception_ptr).
#pragma once

#include <coroutine>
#include <exception>

#include "fabric/task.h"

namespace dmb::fabric {

template <typename Runtime>
struct RootTask {
  struct promise_type {
    Runtime* rt;
    promise_type(Runtime* r, Task<void>&) : rt(r) {
      rt->AddRoot(std::coroutine_handle<promise_type>::from_promise(*this).address());
    }
    ~promise_type() {
      rt->RemoveRoot(std::coroutine_handle<promise_type>::from_promise(*this).address());
    }
    RootTask get_return_object() {
      return RootTask{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { rt->RecordException(std::current_exception()); }
  };
  std::coroutine_handle<promise_type> handle;
};

template <typename Runtime>
RootTask<Runtime> RunRoot(Runtime*, Task<void> task) {
  co_await task;
}

}  // namespace dmb::fabric
