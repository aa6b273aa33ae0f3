// Task<T>: a lazy, move-only coroutine result with symmetric transfer.
//
// A Task starts when it is awaited (or spawned into a TaskGroup) and resumes
// its awaiter directly when it finishes. It inherits the awaiter's
// CancelState, so cancelling a TaskGroup reaches every operation its tasks
// are waiting on, however deep.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "uxds/cancel.h"

namespace uxds {

template <typename T = void>
class Task;

namespace detail {

// The runtime's per-thread cache of small blocks (src/runtime/block_cache.h).
void* AllocateBlock(size_t size);
void FreeBlock(void* block, size_t size) noexcept;

struct PromiseBase {
  // Coroutine frames come from the thread's block cache: a call makes and
  // frees several, on the loop that runs it.
  static void* operator new(size_t size) { return AllocateBlock(size); }
  static void operator delete(void* frame, size_t size) noexcept { FreeBlock(frame, size); }

  std::coroutine_handle<> continuation;
  CancelState* cancel = nullptr;
  std::exception_ptr exception;

  std::suspend_always initial_suspend() noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      std::coroutine_handle<> next = h.promise().continuation;
      return next ? next : std::noop_coroutine();
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { exception = std::current_exception(); }
};

// The CancelState of the coroutine `h` if it is one of ours, else nullptr.
template <typename P>
CancelState* CancelStateOf(std::coroutine_handle<P> h) {
  if constexpr (std::is_base_of_v<PromiseBase, P>) {
    return h.promise().cancel;
  } else {
    (void)h;
    return nullptr;
  }
}

template <typename T>
struct Promise : PromiseBase {
  std::optional<T> value;
  Task<T> get_return_object() noexcept;
  template <typename U>
  void return_value(U&& v) {
    value.emplace(std::forward<U>(v));
  }
  T take() {
    if (exception) std::rethrow_exception(exception);
    return std::move(*value);
  }
};

template <>
struct Promise<void> : PromiseBase {
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() {
    if (exception) std::rethrow_exception(exception);
  }
};

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::Promise<T>;
  using value_type = T;

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  bool valid() const { return static_cast<bool>(h_); }

  class Awaiter {
   public:
    explicit Awaiter(std::coroutine_handle<promise_type> h) : h_(h) {}
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> awaiting) noexcept {
      h_.promise().continuation = awaiting;
      h_.promise().cancel = detail::CancelStateOf(awaiting);
      return h_;
    }
    T await_resume() { return h_.promise().take(); }

   private:
    std::coroutine_handle<promise_type> h_;
  };
  Awaiter operator co_await() && noexcept { return Awaiter(h_); }

  // For TaskGroup / Loop: hands over the coroutine frame.
  std::coroutine_handle<promise_type> release() { return std::exchange(h_, {}); }
  std::coroutine_handle<promise_type> handle() const { return h_; }

 private:
  void reset() {
    if (h_) h_.destroy();
    h_ = {};
  }
  std::coroutine_handle<promise_type> h_;
};

namespace detail {
template <typename T>
Task<T> Promise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}
inline Task<void> Promise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}
}  // namespace detail

// Awaitable that yields the CancelState of the awaiting task (nullptr outside
// a Task). `co_await CurrentCancelState()` never suspends.
struct CurrentCancelState {
  CancelState* state = nullptr;
  bool await_ready() noexcept { return false; }
  template <typename P>
  bool await_suspend(std::coroutine_handle<P> h) noexcept {
    state = detail::CancelStateOf(h);
    return false;
  }
  CancelState* await_resume() noexcept { return state; }
};

}  // namespace uxds
