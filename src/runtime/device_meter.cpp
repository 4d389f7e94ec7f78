#include "joulepipe/runtime/device_meter.hpp"

#include <chrono>
#include <optional>
#include <utility>

namespace joulepipe::runtime {

namespace {

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::unique_ptr<DeviceMeter> DeviceMeter::Open(gpu::CudaStream stream,
                                               std::shared_ptr<monitor::GpuMeter> gpu,
                                               DeviceMeterOptions options, std::string* why_not) {
  if (!gpu) {
    if (why_not != nullptr) *why_not = "no GPU meter to read energy from";
    return nullptr;
  }
  if (options.capacity == 0) options.capacity = DeviceMarkers::kDefaultCapacity;
  std::unique_ptr<DeviceMarkers> markers = DeviceMarkers::Open(stream, why_not, options.capacity);
  if (!markers) return nullptr;
  return std::unique_ptr<DeviceMeter>(new DeviceMeter(std::move(markers), std::move(gpu), options));
}

DeviceMeter::DeviceMeter(std::unique_ptr<DeviceMarkers> markers,
                         std::shared_ptr<monitor::GpuMeter> gpu, DeviceMeterOptions options)
    : markers_(std::move(markers)),
      gpu_(std::move(gpu)),
      options_(options),
      points_(new Pending[options.capacity]),
      spans_(new Span[options.capacity]) {
  thread_ = std::thread([this] { Run(); });
}

DeviceMeter::~DeviceMeter() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

bool DeviceMeter::Mark(const Point& point) noexcept {
  const std::uint64_t head = points_head_.load(std::memory_order_relaxed);
  if (head - points_tail_.load(std::memory_order_acquire) >= options_.capacity) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const std::uint64_t marker = markers_->Record();
  if (marker == 0) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  points_[head % options_.capacity] = Pending{marker, point};
  points_head_.store(head + 1, std::memory_order_release);
  return true;
}

bool DeviceMeter::CaughtUp(double max_wait_s) noexcept {
  const std::uint64_t head = points_head_.load(std::memory_order_relaxed);
  if (points_tail_.load(std::memory_order_acquire) == head) return true;
  if (!markers_->ReachedByRecorder(points_[(head - 1) % options_.capacity].marker)) return false;
  const double deadline = NowS() + max_wait_s;
  while (points_tail_.load(std::memory_order_acquire) != head) {
    if (NowS() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

bool DeviceMeter::Take(Span* out) noexcept {
  const std::uint64_t tail = spans_tail_.load(std::memory_order_relaxed);
  if (tail == spans_head_.load(std::memory_order_acquire)) return false;
  *out = spans_[tail % options_.capacity];
  spans_tail_.store(tail + 1, std::memory_order_release);
  return true;
}

// The meter's thread. Invariant: `previous` is the newest point the device
// has reached (its marker not yet retired: the next span is measured from
// it); `integral_j` / `sampled_s` are the power samples since the meter saw
// it complete, which is the device's work after it.
void DeviceMeter::Run() {
  const auto poll = std::chrono::duration<double>(options_.poll_period_s);
  std::optional<Pending> previous;
  double previous_seen_s = 0;
  std::optional<std::uint64_t> previous_counter_mj;
  double integral_j = 0, sampled_s = 0;
  double last_sample_s = 0, last_power_w = 0;
  bool sampling = false;  // inside a step: the span after `previous` is measured
  while (!stop_.load(std::memory_order_acquire)) {
    const std::uint64_t head = points_head_.load(std::memory_order_acquire);
    std::uint64_t tail = points_tail_.load(std::memory_order_relaxed);
    if (tail == head && !sampling) {
      // Between steps with nothing pending: no sampling, a slower look.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const double now = NowS();
    double power_w = 0;
    try {
      power_w = gpu_->ReadPowerW();
    } catch (...) {
      power_w = last_power_w;
    }
    if (sampling && last_sample_s > 0) {
      // Trapezoids between samples: the energy of the device's work since.
      integral_j += 0.5 * (power_w + last_power_w) * (now - last_sample_s);
      sampled_s += now - last_sample_s;
    }
    last_sample_s = now;
    last_power_w = power_w;
    // Mean power over the spans completed in this look: those after the
    // first have no samples of their own (they ran between two looks).
    const double mean_w = sampled_s > 0 ? integral_j / sampled_s : power_w;
    for (; tail != head; ++tail) {
      const Pending& p = points_[tail % options_.capacity];
      if (!markers_->Reached(p.marker)) break;
      std::optional<std::uint64_t> counter_mj;
      try {
        counter_mj = gpu_->ReadEnergyMj();
      } catch (...) {
      }
      if (previous) {
        const std::optional<double> seconds = markers_->Elapsed(previous->marker, p.marker);
        if (seconds && *seconds >= 0) {
          Span span;
          span.from = previous->point;
          span.to = p.point;
          span.seconds = *seconds;
          const double observed = now - previous_seen_s;
          if (counter_mj && previous_counter_mj &&
              *seconds >= options_.counter_periods * options_.counter_period_s && observed > 0 &&
              *counter_mj >= *previous_counter_mj) {
            span.joules = static_cast<double>(*counter_mj - *previous_counter_mj) / 1e3 *
                          (*seconds / observed);
            span.approximate = false;
          } else {
            span.joules = mean_w * *seconds;
            span.approximate = true;
          }
          span.actual_mhz = gpu_->ReadSmClockMhz();
          const std::uint64_t out = spans_head_.load(std::memory_order_relaxed);
          if (out - spans_tail_.load(std::memory_order_acquire) < options_.capacity) {
            spans_[out % options_.capacity] = span;
            spans_head_.store(out + 1, std::memory_order_release);
          } else {
            dropped_.fetch_add(1, std::memory_order_relaxed);
          }
        }
        markers_->Retire(previous->marker);
      }
      previous = p;
      previous_seen_s = now;
      previous_counter_mj = counter_mj;
      integral_j = 0;
      sampled_s = 0;
      sampling = p.point.type != Point::kStepEnd;
    }
    points_tail_.store(tail, std::memory_order_release);
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace joulepipe::runtime
