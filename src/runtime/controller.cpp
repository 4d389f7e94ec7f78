#include "joulepipe/runtime/controller.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>
#include <utility>

namespace joulepipe::runtime {

namespace {

// Relaxed increment of a counter with one writer (no locked instruction).
inline void Bump(std::atomic<std::uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

ClockController::ClockController(std::shared_ptr<gpu::ClockControl> control, int nvml_index,
                                 std::function<void(const std::string&)> on_failure,
                                 ControllerOptions options)
    : control_(std::move(control)),
      nvml_index_(nvml_index),
      on_failure_(std::move(on_failure)),
      options_(options) {
  thread_ = std::thread([this] { Run(); });
}

ClockController::~ClockController() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

namespace {

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Disarms a RequestWait restore. Only the requesting thread arms it, so a
// relaxed 0 means there is nothing to disarm (the common case costs no
// fenced store).
void ClockController::Disarm() noexcept {
  if (restore_at_ns_.load(std::memory_order_relaxed) != 0)
    restore_at_ns_.store(0, std::memory_order_seq_cst);
}

void ClockController::Request(int mhz) noexcept {
  Disarm();
  Post(mhz < 0 ? kDefaultClocks : mhz);
}

void ClockController::RequestWait(int wait_mhz, int restore_mhz, double restore_after_s) noexcept {
  restore_at_ns_.store(0, std::memory_order_seq_cst);
  restore_mhz_.store(restore_mhz < 0 ? kDefaultClocks : restore_mhz, std::memory_order_seq_cst);
  const double after_ns = std::isfinite(restore_after_s) && restore_after_s > 0
                              ? std::min(restore_after_s, 3600.0) * 1e9
                              : 0;
  restore_at_ns_.store(std::max<std::int64_t>(1, NowNs() + static_cast<std::int64_t>(after_ns)),
                       std::memory_order_seq_cst);
  Post(wait_mhz < 0 ? kDefaultClocks : wait_mhz);
}

void ClockController::RequestPowerLimit(double watts) noexcept {
  Disarm();
  // Milliwatts, as NVML counts them; negative in the slot (clocks are >= 0).
  const double mw = watts * 1000;
  if (!(mw >= 1) || mw > 1e12) {
    Post(kDefaultClocks);
    return;
  }
  Post(-static_cast<std::int64_t>(mw + 0.5));
}

void ClockController::SetMarkers(DeviceMarkers* markers) noexcept {
  markers_.store(markers, std::memory_order_seq_cst);
}

void ClockController::RequestAt(std::uint64_t marker, int mhz) noexcept {
  if (marker == 0 || markers_.load(std::memory_order_relaxed) == nullptr) {
    Request(mhz);
    return;
  }
  Ordered r;
  r.marker = marker;
  r.wanted = mhz < 0 ? kDefaultClocks : mhz;
  PostOrdered(r);
}

void ClockController::RequestWaitAt(std::uint64_t marker, int wait_mhz, int restore_mhz,
                                    double restore_after_s) noexcept {
  if (marker == 0 || markers_.load(std::memory_order_relaxed) == nullptr) {
    RequestWait(wait_mhz, restore_mhz, restore_after_s);
    return;
  }
  Ordered r;
  r.marker = marker;
  r.wanted = wait_mhz < 0 ? kDefaultClocks : wait_mhz;
  r.restore_mhz = restore_mhz < 0 ? kDefaultClocks : restore_mhz;
  r.restore_after_s =
      std::isfinite(restore_after_s) && restore_after_s > 0 ? std::min(restore_after_s, 3600.0) : 0;
  PostOrdered(r);
}

void ClockController::PostOrdered(const Ordered& request) noexcept {
  if (failed_.load(std::memory_order_acquire)) return;
  const std::uint64_t head = ordered_head_.load(std::memory_order_relaxed);
  if (head - ordered_tail_.load(std::memory_order_acquire) >= kOrderedCapacity) {
    // Thousands of requests behind the device: act at the host's point.
    if (request.restore_after_s >= 0) {
      RequestWait(static_cast<int>(request.wanted), request.restore_mhz, request.restore_after_s);
    } else {
      Request(static_cast<int>(request.wanted));
    }
    return;
  }
  Bump(requested_);
  Ordered& slot = ordered_[head % kOrderedCapacity];
  slot = request;
  slot.generation = generation_.load(std::memory_order_relaxed);
  ordered_head_.store(head + 1, std::memory_order_release);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
    }
    wake_.notify_one();
  }
}

bool ClockController::OrderedEmpty() const {
  return ordered_tail_.load(std::memory_order_acquire) ==
         ordered_head_.load(std::memory_order_acquire);
}

bool ClockController::DrainOrdered() {
  DeviceMarkers* markers = markers_.load(std::memory_order_acquire);
  std::uint64_t tail = ordered_tail_.load(std::memory_order_relaxed);
  const std::uint64_t head = ordered_head_.load(std::memory_order_acquire);
  const std::uint64_t generation = generation_.load(std::memory_order_seq_cst);
  std::optional<Ordered> newest;
  bool took = false;
  for (; tail != head; ++tail) {
    const Ordered& r = ordered_[tail % kOrderedCapacity];
    if (r.generation < generation || markers == nullptr) {  // overridden by a host-order request
      if (markers != nullptr) markers->Retire(r.marker);
      Bump(coalesced_);
      took = true;
      continue;
    }
    if (!markers->Reached(r.marker)) break;
    markers->Retire(r.marker);
    if (newest) Bump(coalesced_);
    newest = r;
    took = true;
  }
  ordered_tail_.store(tail, std::memory_order_release);
  if (newest && !failed_.load(std::memory_order_acquire)) {
    Apply(newest->wanted);
    if (newest->restore_after_s >= 0) {
      // The wait's restore counts from when the device got here.
      restore_mhz_.store(newest->restore_mhz, std::memory_order_seq_cst);
      restore_at_ns_.store(std::max<std::int64_t>(1, NowNs() + static_cast<std::int64_t>(
                                                                   newest->restore_after_s * 1e9)),
                           std::memory_order_seq_cst);
    } else {
      restore_at_ns_.store(0, std::memory_order_seq_cst);
    }
  }
  return took;
}

void ClockController::Post(std::int64_t wanted) noexcept {
  if (failed_.load(std::memory_order_acquire)) return;
  // Every request queued behind a marker before this one is overridden.
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  // requested_ and coalesced_ have one writer: the thread calling Request.
  Bump(requested_);
  const std::int64_t previous = slot_.exchange(wanted, std::memory_order_seq_cst);
  if (previous != kEmpty) Bump(coalesced_);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    // The thread is waiting or about to: taking the mutex orders this notify
    // after its predicate check, so the wake-up cannot be lost.
    {
      std::lock_guard<std::mutex> lock(mutex_);
    }
    wake_.notify_one();
  }
}

std::string ClockController::Probe(bool power_limit, double timeout_s) {
  if (applied_.load(std::memory_order_relaxed) > 0) return "";
  std::unique_lock<std::mutex> lock(mutex_);
  probe_done_ = false;
  probe_asked_.store(power_limit ? 2 : 1, std::memory_order_seq_cst);
  wake_.notify_one();
  if (!probe_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                          [this] { return probe_done_; })) {
    probe_asked_.store(0, std::memory_order_seq_cst);
    return "";  // no answer in time: the first change will tell
  }
  return probe_result_;
}

void ClockController::AnswerProbe() {
  const int asked = probe_asked_.exchange(0, std::memory_order_seq_cst);
  if (asked == 0) return;
  std::string why;
  try {
    why = control_->WhyNotChangeable(nvml_index_, asked == 2);
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "unknown exception";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  probe_result_ = std::move(why);
  probe_done_ = true;
  probe_cv_.notify_all();
}

void ClockController::Clear() {
  failed_.store(false, std::memory_order_release);
}

bool ClockController::WaitIdle(double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    // slot_ before busy_: Run sets busy_ before it empties the slot.
    if (slot_.load(std::memory_order_seq_cst) == kEmpty && !busy_.load(std::memory_order_seq_cst) &&
        OrderedEmpty()) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ControllerStats ClockController::stats() const {
  ControllerStats s;
  s.requested = requested_.load(std::memory_order_relaxed);
  s.applied = applied_.load(std::memory_order_relaxed);
  s.restores = restores_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.coalesced = coalesced_.load(std::memory_order_relaxed);
  s.failed = failed_calls_.load(std::memory_order_relaxed);
  s.timed_restores = timed_restores_.load(std::memory_order_relaxed);
  s.last_applied_mhz = last_applied_mhz_.load(std::memory_order_relaxed);
  s.last_power_limit_w = last_power_limit_mw_.load(std::memory_order_relaxed) / 1000.0;
  return s;
}

void ClockController::Run() {
  using Steady = std::chrono::steady_clock;
  const auto poll = std::chrono::duration_cast<Steady::duration>(
      std::chrono::duration<double>(options_.poll_period_s));
  const auto deep_sleep_after = std::chrono::duration_cast<Steady::duration>(
      std::chrono::duration<double>(options_.deep_sleep_after_s));
  Steady::time_point last_request = Steady::now();
  while (true) {
    if (probe_asked_.load(std::memory_order_relaxed) != 0) AnswerProbe();
    busy_.store(true, std::memory_order_seq_cst);
    const std::int64_t wanted = slot_.exchange(kEmpty, std::memory_order_seq_cst);
    if (wanted != kEmpty) {
      if (!failed_.load(std::memory_order_acquire)) Apply(wanted);
      busy_.store(false, std::memory_order_seq_cst);
      last_request = Steady::now();
      continue;
    }
    // Requests behind markers the device has reached (stream order).
    if (!OrderedEmpty() && DrainOrdered()) {
      busy_.store(false, std::memory_order_seq_cst);
      last_request = Steady::now();
      continue;
    }
    // A restore that came due (and was not disarmed by a later request).
    std::int64_t due = restore_at_ns_.load(std::memory_order_seq_cst);
    if (due != 0 && NowNs() >= due &&
        restore_at_ns_.compare_exchange_strong(due, 0, std::memory_order_seq_cst)) {
      const int mhz = restore_mhz_.load(std::memory_order_seq_cst);
      if (!failed_.load(std::memory_order_acquire)) {
        Apply(mhz);
        timed_restores_.fetch_add(1, std::memory_order_relaxed);
      }
      busy_.store(false, std::memory_order_seq_cst);
      last_request = Steady::now();
      continue;
    }
    busy_.store(false, std::memory_order_seq_cst);
    if (stop_.load(std::memory_order_seq_cst)) break;
    if (Steady::now() - last_request < deep_sleep_after ||
        restore_at_ns_.load(std::memory_order_seq_cst) != 0 || !OrderedEmpty()) {
      std::this_thread::sleep_for(poll);  // polling: Request needs no wake-up
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_.load(std::memory_order_seq_cst)) break;
    // Dekker with Request: publish "sleeping", then re-check the slot.
    sleeping_.store(true, std::memory_order_seq_cst);
    wake_.wait(lock, [this] {
      return slot_.load(std::memory_order_seq_cst) != kEmpty || !OrderedEmpty() ||
             probe_asked_.load(std::memory_order_seq_cst) != 0 ||
             stop_.load(std::memory_order_seq_cst);
    });
    sleeping_.store(false, std::memory_order_seq_cst);
    last_request = Steady::now();
  }
  // Leave the GPU as we found it.
  if (Changed()) RestoreDefaults();
}

bool ClockController::Changed() const {
  return last_applied_mhz_.load(std::memory_order_relaxed) != kDefaultClocks ||
         last_power_limit_mw_.load(std::memory_order_relaxed) != 0;
}

void ClockController::RestoreDefaults() {
  control_->Restore();  // noexcept by contract
  restores_.fetch_add(1, std::memory_order_relaxed);
  last_applied_mhz_.store(kDefaultClocks, std::memory_order_relaxed);
  last_power_limit_mw_.store(0, std::memory_order_relaxed);
}

void ClockController::Apply(std::int64_t wanted) {
  const int mhz = wanted >= 0 ? static_cast<int>(wanted) : kDefaultClocks;
  const std::int64_t mw = wanted < 0 ? -wanted : 0;
  if (mhz == last_applied_mhz_.load(std::memory_order_relaxed) &&
      mw == last_power_limit_mw_.load(std::memory_order_relaxed)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (mhz == kDefaultClocks && mw == 0) {
    RestoreDefaults();
    return;
  }
  // One lever at a time: a clock request ends a power limit and the reverse,
  // so the GPU holds exactly the latest request whatever was coalesced.
  std::string reason;
  try {
    if (mw != 0) {
      if (last_applied_mhz_.load(std::memory_order_relaxed) != kDefaultClocks) {
        control_->ResetLockedClocks(nvml_index_);
        last_applied_mhz_.store(kDefaultClocks, std::memory_order_relaxed);
      }
      control_->SetPowerLimit(nvml_index_, static_cast<double>(mw) / 1000);
      last_power_limit_mw_.store(mw, std::memory_order_relaxed);
    } else {
      if (last_power_limit_mw_.load(std::memory_order_relaxed) != 0) {
        control_->ResetPowerLimit(nvml_index_);
        last_power_limit_mw_.store(0, std::memory_order_relaxed);
      }
      control_->SetLockedClocks(nvml_index_, mhz, mhz);
      last_applied_mhz_.store(mhz, std::memory_order_relaxed);
    }
    applied_.fetch_add(1, std::memory_order_relaxed);
    return;
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown exception";
  }
  // The failure path: allocation and logging are fine here (once).
  failed_calls_.fetch_add(1, std::memory_order_relaxed);
  failed_.store(true, std::memory_order_release);
  slot_.store(kEmpty, std::memory_order_seq_cst);
  RestoreDefaults();
  std::string described;
  try {
    described = control_->Describe();
  } catch (...) {
    described = "the clock control";
  }
  if (on_failure_) {
    try {
      const std::string what =
          mw != 0
              ? "set GPU " + std::to_string(nvml_index_) + "'s power limit to " +
                    std::to_string(static_cast<double>(mw) / 1000).substr(0, 8) + " W"
              : "lock GPU " + std::to_string(nvml_index_) + " at " + std::to_string(mhz) + " MHz";
      on_failure_("could not " + what + " through " + described + ": " + reason);
    } catch (...) {
      // Never let a callback kill the controller thread.
    }
  }
}

}  // namespace joulepipe::runtime
