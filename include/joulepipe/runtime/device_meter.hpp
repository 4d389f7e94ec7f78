// DeviceMeter: time and energy between points on the training's CUDA
// stream, measured where the GPU is (issue 58). On a real GPU the host runs
// ahead of the device: the host's begin and end of an instruction say when
// its kernels were ENQUEUED, not when they ran. Here each point is a CUDA
// event recorded on the stream (DeviceMarkers); a thread of the meter's own
// watches the points complete, in order, and measures each span between two
// consecutive points:
//   * its time is the device's (cuEventElapsedTime between the two events);
//   * its energy comes from the GPU's meter read while the span ran on the
//     device: the energy counter's delta between the moments the meter saw
//     the two points complete when the span lasts at least counter_periods
//     counter periods, else the mean of the instant-power samples taken
//     while it ran (every poll_period_s) times its device time
//     (`approximate`);
//     either way scaled from the host's view of the span to the device's
//     time, so the few polls' lag at each end does not count;
//   * its clock is the SM clock read as its end completed.
// Spans come out in device order through Take, from the training thread,
// without waiting: the training thread never synchronises with the GPU.
//
//   auto meter = DeviceMeter::Open(stream, gpu_meter, {}, &why);
//   meter->Mark({Point::kInstructionBegin, kind, mhz});   // at a hook
//   DeviceMeter::Span span;
//   while (meter->Take(&span)) ...                         // at a later hook
//
// A span is reported for every pair of consecutive points that both
// completed; `from` and `to` say which points bound it (the caller keeps the
// spans it wants: an instruction, a wait). A point that cannot be recorded
// (the ring is full: the device is thousands of points behind) is dropped,
// counted, and the span around it is not reported.
//
// Threads: Mark and Take from one thread (the training thread, which owns
// the stream's CUDA context); the meter's thread does the rest. Never throws
// after Open.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "joulepipe/gpu/cuda_driver.hpp"
#include "joulepipe/model/instruction.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/device_markers.hpp"

namespace joulepipe::runtime {

struct Point {
  enum Type : std::uint8_t { kStepBegin, kInstructionBegin, kInstructionEnd, kStepEnd };
  Type type = kStepBegin;
  model::Kind kind = model::Kind::kForward;  // instruction points
  int mhz = 0;                               // the clock requested for the instruction
  std::uint32_t tag = 0;                     // the caller's, returned with the spans
};

struct DeviceMeterOptions {
  double poll_period_s = 100e-6;  // how often the thread looks while points are pending
  double counter_period_s = 0.1;  // the energy counter's update period (NVML: 100 ms)
  // Spans this many counter periods long or longer take the counter's delta
  // (each end is up to one update off: 2 periods suit profile rows, whose
  // spans are many; a step's line wants monitor::kCounterPeriodsForExact).
  double counter_periods = 2;
  std::size_t capacity = 4096;  // points in flight (recorded, not yet taken)
};

class DeviceMeter {
 public:
  struct Span {
    Point from, to;
    double seconds = 0;       // the device's time between the two points
    double joules = 0;        // this GPU's energy over it
    bool approximate = true;  // power samples (not the energy counter)
    int actual_mhz = 0;       // the SM clock read as `to` completed; 0 unknown
  };

  // A meter of the points on `stream`, with `gpu` read for energy, power
  // and clock. nullptr, with why_not, without a CUDA driver.
  static std::unique_ptr<DeviceMeter> Open(gpu::CudaStream stream,
                                           std::shared_ptr<monitor::GpuMeter> gpu,
                                           DeviceMeterOptions options, std::string* why_not);
  ~DeviceMeter();  // joins the thread; points still pending are dropped
  DeviceMeter(const DeviceMeter&) = delete;
  DeviceMeter& operator=(const DeviceMeter&) = delete;

  // Training thread: records `point` on the stream now. False when it could
  // not (counted in dropped()).
  bool Mark(const Point& point) noexcept;
  // Training thread: the next measured span in device order, if one is ready.
  bool Take(Span* out) noexcept;
  // Training thread: whether every point marked so far has been measured
  // (its spans ready for Take). When the device has already reached the
  // newest point, waits up to max_wait_s for the meter's thread to see it
  // (about one poll period); when the device is still behind, returns false
  // at once: it never waits for the GPU.
  bool CaughtUp(double max_wait_s) noexcept;

  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const std::string& library() const { return markers_->library(); }

 private:
  struct Pending {
    std::uint64_t marker = 0;
    Point point;
  };
  DeviceMeter(std::unique_ptr<DeviceMarkers> markers, std::shared_ptr<monitor::GpuMeter> gpu,
              DeviceMeterOptions options);
  void Run();

  const std::unique_ptr<DeviceMarkers> markers_;
  const std::shared_ptr<monitor::GpuMeter> gpu_;
  const DeviceMeterOptions options_;
  // Points recorded (training thread -> meter thread) and spans measured
  // (meter thread -> training thread): single-producer single-consumer rings.
  std::unique_ptr<Pending[]> points_;
  std::atomic<std::uint64_t> points_head_{0}, points_tail_{0};
  std::unique_ptr<Span[]> spans_;
  std::atomic<std::uint64_t> spans_head_{0}, spans_tail_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace joulepipe::runtime
