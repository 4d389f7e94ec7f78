#include "joulepipe/runtime/device_markers.hpp"

#include <utility>

namespace joulepipe::runtime {

std::unique_ptr<DeviceMarkers> DeviceMarkers::Open(gpu::CudaStream stream, std::string* why_not,
                                                   std::size_t capacity) {
  std::optional<gpu::CudaDriver> driver = gpu::LoadCudaDriver(why_not);
  if (!driver) return nullptr;
  gpu::CudaContext context = nullptr;
  if (driver->ctx_get_current != nullptr) driver->ctx_get_current(&context);
  std::vector<gpu::CudaEvent> events(capacity == 0 ? kDefaultCapacity : capacity, nullptr);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const gpu::CudaResult made = driver->event_create(&events[i], gpu::kCudaEventDefault);
    if (made != 0) {
      for (std::size_t j = 0; j < i; ++j) driver->event_destroy(events[j]);
      if (why_not != nullptr) {
        *why_not = "cannot create a CUDA event through " + driver->path + " (CUDA error " +
                   std::to_string(made) + ")";
      }
      return nullptr;
    }
  }
  return std::unique_ptr<DeviceMarkers>(
      new DeviceMarkers(std::move(*driver), stream, std::move(events), context));
}

DeviceMarkers::DeviceMarkers(gpu::CudaDriver driver, gpu::CudaStream stream,
                             std::vector<gpu::CudaEvent> events, gpu::CudaContext context)
    : driver_(std::move(driver)), stream_(stream), events_(std::move(events)), context_(context) {}

DeviceMarkers::~DeviceMarkers() {
  for (gpu::CudaEvent e : events_) driver_.event_destroy(e);
}

std::uint64_t DeviceMarkers::Record() noexcept {
  if (next_ - retired_.load(std::memory_order_acquire) > events_.size()) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  const std::uint64_t m = next_;
  if (driver_.event_record(EventOf(m), stream_) != 0) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  ++next_;
  return m;
}

void DeviceMarkers::BindContext() noexcept {
  if (context_bound_) return;
  context_bound_ = true;
  if (context_ != nullptr && driver_.ctx_set_current != nullptr) driver_.ctx_set_current(context_);
}

bool DeviceMarkers::Reached(std::uint64_t m) noexcept {
  if (m == 0) return true;
  BindContext();
  return driver_.event_query(EventOf(m)) == 0;
}

bool DeviceMarkers::ReachedByRecorder(std::uint64_t m) noexcept {
  if (m == 0) return true;
  return driver_.event_query(EventOf(m)) == 0;
}

void DeviceMarkers::Retire(std::uint64_t m) noexcept {
  if (m > retired_.load(std::memory_order_relaxed)) retired_.store(m, std::memory_order_release);
}

std::optional<double> DeviceMarkers::Elapsed(std::uint64_t a, std::uint64_t b) noexcept {
  if (a == 0 || b == 0) return std::nullopt;
  BindContext();
  float ms = 0;
  if (driver_.event_elapsed(&ms, EventOf(a), EventOf(b)) != 0) return std::nullopt;
  return ms / 1e3;
}

}  // namespace joulepipe::runtime
