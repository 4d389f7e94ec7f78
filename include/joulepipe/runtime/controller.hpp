// ClockController: applies SM clocks to one GPU from a thread of its own, so
// the training thread never waits for NVML or the daemon.
//
// The training thread posts the clock it wants with Request(); the
// controller thread applies it through gpu::ClockControl. The request is a
// single slot, latest wins:
//   * coalescing — a request that replaces one the thread has not taken yet
//     counts as coalesced and is never applied (e.g. idle clock at an
//     instruction's end, then the next instruction's clock at its begin);
//   * no-op skipping — a request equal to the clock last applied is skipped;
//   * kDefaultClocks — restores the device's default clocks
//     (ClockControl::Restore: reset everything that object changed);
//   * RequestWait — clocks while waiting (plans with wait_frequency): the
//     wait clock now, and a timed restore to the next instruction's clock
//     after the plan's wait_restore_s, which the controller thread applies
//     when it is due unless a later request came first (any Request or
//     RequestPowerLimit disarms it: the training thread has moved on);
//   * RequestPowerLimit — the other lever: a power limit at default clocks
//     (power-limit plans). It shares the slot, latest wins, and the GPU
//     holds one lever at a time: applying a power limit resets locked
//     clocks first, and applying a clock resets the power limit first.
//
// Failure: when a ClockControl call throws, the controller restores the
// default clocks (Restore), enters the failed state, in which every further
// request is dropped, and calls on_failure(reason) once from its thread.
// Clear() leaves the failed state (the next request is applied again).
//
// Waking up without costing the training thread: waking a sleeping thread
// takes a system call (futex wake, several µs — more than the hook budget).
// So while requests keep coming the controller does not block: it polls the
// slot every poll_period_s (a plain sleep, no lock), and Request() is then a
// few atomic operations. Only after deep_sleep_after_s without a request
// does it block on a condition variable; the first Request after that pays
// one wake-up (once per long pause, e.g. a checkpoint). A change is applied
// within poll_period_s of its request (plus the ClockControl call itself);
// the polling costs about 1/poll_period_s short wake-ups per second of a
// CPU core while training runs (5,000/s at the default 200 µs).
//
// Stream order (device_markers.hpp): with markers set, RequestAt and
// RequestWaitAt queue a request behind a marker just recorded on the
// training's stream, and the controller thread applies it only when the
// device reaches that marker, in order (a run of markers found reached
// together applies the newest request; the others count as coalesced). A
// timed restore counts from there. A host-order request (Request,
// RequestWait, RequestPowerLimit) overrides every request queued before it:
// those are dropped, never applied later. While requests wait for their
// markers the thread polls (no deep sleep).
//
// Threads and cost: Request() may be called from one thread at a time (the
// training thread); it never blocks on a GPU call, takes no lock unless the
// controller thread is in deep sleep, never allocates, never throws. Every
// other member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/runtime/device_markers.hpp"

namespace joulepipe::runtime {

struct ControllerStats {
  std::uint64_t requested = 0;       // Request calls accepted (not failed)
  std::uint64_t applied = 0;         // SetLockedClocks / SetPowerLimit calls that succeeded
  std::uint64_t restores = 0;        // Restore calls (back to default clocks)
  std::uint64_t skipped = 0;         // requests equal to the clock in force
  std::uint64_t coalesced = 0;       // requests replaced before they were taken
  std::uint64_t failed = 0;          // ClockControl calls that threw
  std::uint64_t timed_restores = 0;  // RequestWait restores that came due and were applied
  int last_applied_mhz = 0;          // the clock in force: 0 = default clocks
  double last_power_limit_w = 0;     // the power limit in force: 0 = the default
};

struct ControllerOptions {
  double poll_period_s = 200e-6;    // slot polling while requests come
  double deep_sleep_after_s = 1.0;  // block (and need a wake-up) after this idle time
};

class ClockController {
 public:
  // Request(kDefaultClocks): back to the default clocks.
  static constexpr int kDefaultClocks = 0;

  // `control` must not be null. Starts the thread.
  ClockController(std::shared_ptr<gpu::ClockControl> control, int nvml_index,
                  std::function<void(const std::string&)> on_failure,
                  ControllerOptions options = {});
  // Restores the default clocks if any were applied (synchronously, on the
  // controller thread), then joins it.
  ~ClockController();
  ClockController(const ClockController&) = delete;
  ClockController& operator=(const ClockController&) = delete;

  // Wants the GPU locked at `mhz` (min = max = mhz), or its default clocks
  // for kDefaultClocks (or any value <= 0). Dropped while failed.
  void Request(int mhz) noexcept;
  // Wants the GPU at `wait_mhz` now and, `restore_after_s` from now, at
  // `restore_mhz` (kDefaultClocks: the default clocks), unless another
  // request comes first. The restore is applied within poll_period_s of
  // its time (the controller does not deep-sleep while one is armed). Same
  // cost and rules as Request, plus two atomic stores.
  void RequestWait(int wait_mhz, int restore_mhz, double restore_after_s) noexcept;
  // Wants the GPU at default clocks under a power limit of `watts` (to the
  // milliwatt); watts < 0.001 (or not finite) = default clocks and limit.
  // Same cost and rules as Request.
  void RequestPowerLimit(double watts) noexcept;

  // Stream order: requests at markers of `markers` (which must outlive this
  // object, or be replaced by nullptr while none is queued). Set once,
  // before the first RequestAt.
  void SetMarkers(DeviceMarkers* markers) noexcept;
  // Request and RequestWait once the device reaches `marker` (from
  // markers.Record(); 0 = at once, as Request). Training thread. When the
  // queue is full (kOrderedCapacity requests waiting) it acts at once.
  void RequestAt(std::uint64_t marker, int mhz) noexcept;
  void RequestWaitAt(std::uint64_t marker, int wait_mhz, int restore_mhz,
                     double restore_after_s) noexcept;
  static constexpr std::size_t kOrderedCapacity = 8192;

  // Whether the control accepts changes to this GPU at all
  // (ClockControl::WhyNotChangeable for the lever: `power_limit`, else the
  // locked clocks), asked on the controller thread (the one that owns the
  // control) before a plan is said to be applied. Blocks the caller until
  // answered (at most one control call), at most `timeout_s`. Not for the
  // hooks. "" when accepted or not known, else why not. Once the controller
  // has applied a setting the answer is "" without a call.
  std::string Probe(bool power_limit, double timeout_s = 5.0);

  // Leaves the failed state.
  void Clear();
  bool failed() const { return failed_.load(std::memory_order_acquire); }

  // Blocks until no request is pending and none is being applied; false on
  // timeout.
  bool WaitIdle(double timeout_s) const;

  ControllerStats stats() const;

 private:
  static constexpr std::int64_t kEmpty = INT64_MIN;

  // A request queued behind a marker.
  struct Ordered {
    std::uint64_t marker = 0;
    std::uint64_t generation = 0;  // host-order requests posted before it
    std::int64_t wanted = 0;       // as the slot holds it
    int restore_mhz = 0;           // wait: the clock after restore_after_s
    double restore_after_s = -1;   // < 0: not a wait
  };

  void Run();
  void Post(std::int64_t wanted) noexcept;
  void PostOrdered(const Ordered& request) noexcept;
  // Controller thread: applies the newest queued request whose marker the
  // device reached (dropping those a host-order request overrode). True
  // when it took any.
  bool DrainOrdered();
  bool OrderedEmpty() const;
  void Disarm() noexcept;
  void Apply(std::int64_t wanted);
  bool Changed() const;
  void RestoreDefaults();

  const std::shared_ptr<gpu::ClockControl> control_;
  const int nvml_index_;
  const std::function<void(const std::string&)> on_failure_;
  const ControllerOptions options_;

  // The slot: kEmpty, the wanted clock (>= 0), or minus the wanted power
  // limit in milliwatts (< 0). Written by Request, taken
  // (exchanged with kEmpty) by the thread.
  std::atomic<std::int64_t> slot_{kEmpty};
  // True while the thread is in deep sleep (or about to be) on wake_.
  // Request notifies only then; the seq_cst store/load pairs with slot_ so
  // no wake-up is lost.
  std::atomic<bool> sleeping_{false};
  // The armed restore of RequestWait: due time (steady-clock nanoseconds,
  // 0 = none) and clock. Written by the requesting thread; the controller
  // thread fires it by exchanging the time with 0. Should a new arm race a
  // firing one, the restore clock applied may be the newer one, early: a
  // higher clock than the wait's, never a slower compute.
  std::atomic<std::int64_t> restore_at_ns_{0};
  std::atomic<int> restore_mhz_{0};
  std::atomic<std::uint64_t> timed_restores_{0};
  // The ordered queue (single producer: the requesting thread; single
  // consumer: the controller thread) and the generation of host-order
  // requests (bumped by Post, read by the consumer to drop what they
  // overrode).
  std::atomic<DeviceMarkers*> markers_{nullptr};
  std::unique_ptr<Ordered[]> ordered_{new Ordered[kOrderedCapacity]};
  std::atomic<std::uint64_t> ordered_head_{0};  // next to write
  std::atomic<std::uint64_t> ordered_tail_{0};  // next to take
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> busy_{false};  // applying a taken request
  std::atomic<bool> failed_{false};
  std::atomic<bool> stop_{false};

  std::atomic<std::uint64_t> requested_{0};
  std::atomic<std::uint64_t> applied_{0};
  std::atomic<std::uint64_t> restores_{0};
  std::atomic<std::uint64_t> skipped_{0};
  std::atomic<std::uint64_t> coalesced_{0};
  std::atomic<std::uint64_t> failed_calls_{0};
  std::atomic<int> last_applied_mhz_{0};              // written by the thread only
  std::atomic<std::int64_t> last_power_limit_mw_{0};  // written by the thread only

  // Probe: asked by any thread (under mutex_), answered by the controller
  // thread.
  std::atomic<int> probe_asked_{0};  // 0 none, 1 clocks, 2 power limit
  bool probe_done_ = false;          // under mutex_
  std::string probe_result_;         // under mutex_
  std::condition_variable probe_cv_;
  void AnswerProbe();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  mutable std::condition_variable idle_;
  std::thread thread_;
};

}  // namespace joulepipe::runtime
