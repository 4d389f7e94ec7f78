// RunCancellable: a long library call from Python that Ctrl-C can stop.
//
// Python runs signal handlers only on the main thread and only when it holds
// the GIL, so a call that releases the GIL for minutes would sit out Ctrl-C.
// Here the work runs on a worker thread; the calling thread waits without
// the GIL and, every kPoll and at each progress event, takes it to run the
// signal handlers (PyErr_CheckSignals) and the caller's progress callback.
// A KeyboardInterrupt (or any exception from a handler or the callback)
// raises the work's cancel flag, waits for the worker to stop (the library
// checks the flag often and throws model::Cancelled, leaving nothing
// behind) and is re-raised. The work itself never touches Python objects.
//
// `progress(phase, fraction)` may be None; it runs on the calling thread.
// Events that arrive faster than the caller takes them are coalesced (the
// newest wins).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "bindings.hpp"

namespace joulepipe::python {

using ProgressFn = std::function<void(const char* phase, double fraction)>;

template <typename Result>
Result RunCancellable(
    std::function<Result(const std::atomic<bool>* cancel, ProgressFn progress)> work,
    const py::object& progress) {
  constexpr auto kPoll = std::chrono::milliseconds(50);
  struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    bool done = false;
    bool has_event = false;
    std::string phase;
    double fraction = 0;
    std::optional<Result> result;
    std::exception_ptr error;
    std::atomic<bool> cancel{false};
  };
  auto shared = std::make_shared<Shared>();
  ProgressFn report = [shared](const char* phase, double fraction) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->phase = phase;
    shared->fraction = fraction;
    shared->has_event = true;
    shared->wake.notify_all();
  };
  std::thread worker([shared, work = std::move(work), report = std::move(report)] {
    std::optional<Result> result;
    std::exception_ptr error;
    try {
      result.emplace(work(&shared->cancel, report));
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->result = std::move(result);
    shared->error = error;
    shared->done = true;
    shared->wake.notify_all();
  });
  // Any way out that did not join (an unexpected exception; or Python, at
  // interpreter shutdown, ending this daemon thread by a forced unwind when
  // it asks for the GIL back) cancels the worker and lets it go: it holds
  // only `shared`, and a joinable std::thread destroyed would abort the
  // whole process ("terminate called without an active exception").
  struct LetGo {
    std::thread& worker;
    Shared& shared;
    ~LetGo() {
      if (!worker.joinable()) return;
      shared.cancel.store(true);
      worker.detach();
    }
  } let_go{worker, *shared};
  // Raises the cancel flag and joins; the caller re-raises its Python error.
  auto stop = [&] {
    shared->cancel.store(true);
    py::gil_scoped_release release;
    worker.join();
  };
  for (;;) {
    bool done = false, event = false;
    std::string phase;
    double fraction = 0;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(shared->mutex);
      shared->wake.wait_for(lock, kPoll, [&] { return shared->done || shared->has_event; });
      done = shared->done;
      if (shared->has_event) {
        event = true;
        phase = shared->phase;
        fraction = shared->fraction;
        shared->has_event = false;
      }
    }
    if (PyErr_CheckSignals() != 0) {
      py::error_already_set interrupt;  // fetched before the GIL is let go
      stop();
      throw interrupt;
    }
    if (event && !progress.is_none()) {
      try {
        progress(phase, fraction);
      } catch (py::error_already_set&) {
        stop();
        throw;
      }
    }
    if (done) break;
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  if (shared->error) std::rethrow_exception(shared->error);
  return std::move(*shared->result);
}

}  // namespace joulepipe::python
