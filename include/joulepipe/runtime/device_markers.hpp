// DeviceMarkers: points on the training's CUDA stream, so that the runtime
// acts where the GPU is, not where the host is (issue 58). On a real GPU the
// host runs ahead of the device by up to the launch queue; a hook's host
// time says when an instruction was ENQUEUED. A marker (a CUDA event
// recorded on the stream at the hook) completes when the device reaches that
// point: the controller applies the clock asked for there only then
// (ClockController::RequestAt), and the device time between two markers is
// how long the GPU took between them.
//
//   auto markers = DeviceMarkers::Open(stream, &why);   // training thread
//   std::uint64_t m = markers->Record();                 // at a hook: ~1 cuEventRecord
//   ... controller thread: markers->Reached(m), then Retire(m) ...
//
// Markers are numbered from 1 in recording order; 0 means "no marker" (the
// ring is full: the device is more than `capacity` markers behind, far past
// any real launch queue; the caller then acts at the host's point). Events
// are created once (Open) and reused round the ring: marker m uses event
// (m - 1) % capacity, which may be recorded again only once m - capacity has
// been retired.
//
// Threads: Open and Record from the training thread (the one whose CUDA
// context owns the stream); Reached, Retire and Elapsed from one other
// thread (the controller's), which Open's context is made current on at its
// first call. Never throws after Open.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/gpu/cuda_driver.hpp"

namespace joulepipe::runtime {

class DeviceMarkers {
 public:
  static constexpr std::size_t kDefaultCapacity = 4096;

  // Markers on `stream` (a CUstream; PyTorch's current stream's cuda_stream;
  // nullptr is the legacy default stream). nullptr with `why_not` said when
  // there is no CUDA driver or an event cannot be made.
  static std::unique_ptr<DeviceMarkers> Open(gpu::CudaStream stream, std::string* why_not,
                                             std::size_t capacity = kDefaultCapacity);
  ~DeviceMarkers();
  DeviceMarkers(const DeviceMarkers&) = delete;
  DeviceMarkers& operator=(const DeviceMarkers&) = delete;

  // Training thread: records the next marker; its number, or 0 (no marker:
  // the ring is full or the record failed).
  std::uint64_t Record() noexcept;
  // The other thread: whether the device has reached marker `m` (recorded,
  // not yet retired).
  bool Reached(std::uint64_t m) noexcept;
  // Training thread (its context is current): the same question about the
  // newest marker it recorded, which cannot have been recorded again.
  bool ReachedByRecorder(std::uint64_t m) noexcept;
  // The other thread: markers up to `m` will not be asked about again.
  void Retire(std::uint64_t m) noexcept;
  // The other thread: the device's time from marker a to marker b (both
  // reached, not retired), seconds.
  std::optional<double> Elapsed(std::uint64_t a, std::uint64_t b) noexcept;

  const std::string& library() const { return driver_.path; }
  std::uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }

 private:
  DeviceMarkers(gpu::CudaDriver driver, gpu::CudaStream stream, std::vector<gpu::CudaEvent> events,
                gpu::CudaContext context);
  gpu::CudaEvent EventOf(std::uint64_t m) const { return events_[(m - 1) % events_.size()]; }
  void BindContext() noexcept;

  const gpu::CudaDriver driver_;
  const gpu::CudaStream stream_;
  const std::vector<gpu::CudaEvent> events_;
  const gpu::CudaContext context_;
  bool context_bound_ = false;             // the other thread's
  std::uint64_t next_ = 1;                 // training thread's
  std::atomic<std::uint64_t> retired_{0};  // written by the other thread
  std::atomic<std::uint64_t> skipped_{0};
};

}  // namespace joulepipe::runtime
