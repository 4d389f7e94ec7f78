// The simulated GPU's streams and events (include/joulepipe/sim_nvml/
// device_stream.hpp): a device thread per stream runs its queue in order.
#include "joulepipe/sim_nvml/device_stream.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include <nlohmann/json.hpp>

#include "library.hpp"

#define SIM_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace joulepipe::sim_nvml {
namespace {

constexpr double kPollS = 50e-6;       // the device thread's polling while in use
constexpr double kSleepAfterS = 0.05;  // then it sleeps until a launch wakes it

// An event's state, shared by its handle and the queue items that record it.
struct EventState {
  std::mutex mu;
  std::condition_variable done_cv;
  std::uint64_t recorded = 0;   // records queued so far
  std::uint64_t completed = 0;  // of which the device reached
  double device_unix_s = 0;     // when the device reached the newest completed record
};

struct Kernel {
  double seconds_at_max = 0;
  double compute_fraction = 1;
  double activity = 1;
};
struct Record {
  std::shared_ptr<EventState> event;
  std::uint64_t generation = 0;
};
using Item = std::variant<Kernel, Record>;

}  // namespace
}  // namespace joulepipe::sim_nvml

struct SimEventHandle {
  std::shared_ptr<joulepipe::sim_nvml::EventState> state =
      std::make_shared<joulepipe::sim_nvml::EventState>();
};

struct SimStream {
  SimStream(nvmlDevice_t d, unsigned i, std::size_t depth) : device(d), index(i), depth(depth) {
    worker = std::thread([this] { Run(); });
  }
  ~SimStream() {
    {
      std::unique_lock<std::mutex> lock(mu);
      drained.wait(lock, [this] { return queue.empty() && !busy; });
      stop = true;
    }
    changed.notify_all();
    worker.join();
  }

  // Host side: waits for room, then queues.
  void Push(joulepipe::sim_nvml::Item item) {
    std::unique_lock<std::mutex> lock(mu);
    room.wait(lock, [this] { return queue.size() < depth; });
    queue.push_back(std::move(item));
    // A wake-up is a system call: only when the device thread sleeps.
    if (idle) changed.notify_all();
  }
  void Synchronize() {
    std::unique_lock<std::mutex> lock(mu);
    drained.wait(lock, [this] { return queue.empty() && !busy; });
  }

 private:
  void Run();
  void RunKernel(const joulepipe::sim_nvml::Kernel& k);
  // The device's load from now on (as nvmlJoulepipeSimSetLoad); returns the
  // SM clock in force now (MHz) and the GPU's highest.
  void SetLoad(int state, double compute_fraction, double activity);
  std::pair<double, double> Clocks();
  // The device's exact energy from the epoch to Unix time t (the past).
  double EnergyAt(double t);

 public:
  const nvmlDevice_t device;
  const unsigned index;
  const std::size_t depth;

 private:
  std::mutex mu;
  std::condition_variable changed, room, drained;
  std::deque<joulepipe::sim_nvml::Item> queue;
  bool busy = false;  // the device thread holds an item it took from the queue
  bool idle = false;  // the device thread waits for the queue (under mu)
  bool stop = false;
  std::thread worker;
};

namespace joulepipe::sim_nvml {
namespace {

double Now() {
  return NowUnixS();
}

}  // namespace
}  // namespace joulepipe::sim_nvml

void SimStream::SetLoad(int state, double compute_fraction, double activity) {
  using namespace joulepipe::sim_nvml;
  WithDevice("kernel", device, [&](DeviceCall& c) {
    Settings s = c.settings();
    s.load_state = state;
    s.load_compute_fraction = state == kLoadBusy ? compute_fraction : 1.0;
    s.load_activity = state == kLoadBusy ? activity : 1.0;
    if (!(s == c.settings())) c.SetSettings(s);
    return NVML_SUCCESS;
  });
}

double SimStream::EnergyAt(double t) {
  using namespace joulepipe::sim_nvml;
  double joules = 0;
  WithDevice("kernel", device, [&](DeviceCall& c) {
    joules = EnergyJ(c.device(), c.config().epoch_unix_s, c.history(), t);
    return NVML_SUCCESS;
  });
  return joules;
}

std::pair<double, double> SimStream::Clocks() {
  using namespace joulepipe::sim_nvml;
  double now = 0, highest = 0;
  WithDevice("kernel", device, [&](DeviceCall& c) {
    now = c.Now().sm_mhz;
    highest = c.gpu().max_sm_mhz;
    return NVML_SUCCESS;
  });
  return {now, highest};
}

void SimStream::RunKernel(const joulepipe::sim_nvml::Kernel& k) {
  using namespace joulepipe::sim_nvml;
  SetLoad(kLoadBusy, k.compute_fraction, k.activity);
  const double start = Now();
  const double start_j = EnergyAt(start);
  double left = 1;  // share of the kernel still to run
  double first_mhz = 0, mhz = 0;
  while (left > 1e-12) {
    auto [now_mhz, highest] = Clocks();
    if (highest <= 0) highest = now_mhz = 1;  // NVML shut down meanwhile: run at full speed
    mhz = now_mhz > 0 ? now_mhz : highest;
    if (first_mhz == 0) first_mhz = mhz;
    // Time the whole kernel would take at this clock: the compute share
    // slows with 1 / f, the memory share does not.
    const double whole = k.seconds_at_max * ((1 - k.compute_fraction) +
                                             k.compute_fraction * highest / std::max(1.0, mhz));
    const double slice = std::min(left * whole, kMaxSliceS);
    const double from = Now();
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(from + slice))));
    // The time that really passed (a busy host oversleeps): the work done.
    left -= std::max(slice, Now() - from) / whole;
  }
  const double end = Now();
  // The ground truth: the device's energy while the kernel ran.
  const double joules = EnergyAt(end) - start_j;
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  if (lib.init_count > 0 && !lib.config.call_log.empty()) {
    nlohmann::json args{{"start_unix_s", start},
                        {"end_unix_s", end},
                        {"start_mhz", first_mhz},
                        {"end_mhz", mhz},
                        {"energy_j", joules},
                        {"seconds_at_max_clock", k.seconds_at_max},
                        {"compute_fraction", k.compute_fraction}};
    LogSetter(lib, "kernel", static_cast<int>(index), args.dump(), NVML_SUCCESS);
  }
}

void SimStream::Run() {
  using namespace joulepipe::sim_nvml;
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (queue.empty()) {
        busy = false;
        drained.notify_all();
      }
      // Like a GPU's front end, poll for work while the stream is in use
      // (every kPollS: the host's launch needs no wake-up, which would cost
      // a system call per launch), and sleep after kSleepAfterS idle.
      const auto since = std::chrono::steady_clock::now();
      while (!stop && queue.empty() &&
             std::chrono::steady_clock::now() - since <
                 std::chrono::duration<double>(kSleepAfterS)) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::duration<double>(kPollS));
        lock.lock();
      }
      idle = true;
      changed.wait(lock, [this] { return stop || !queue.empty(); });
      idle = false;
      if (stop && queue.empty()) return;
      item = std::move(queue.front());
      queue.pop_front();
      busy = true;
      room.notify_all();
    }
    if (const Kernel* k = std::get_if<Kernel>(&item)) {
      RunKernel(*k);
      bool idle = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        idle = queue.empty();
      }
      // Nothing queued: the device waits at its clock until more comes.
      if (idle) SetLoad(kLoadBlocked, 1, 1);
    } else {
      const Record& r = std::get<Record>(item);
      std::lock_guard<std::mutex> lock(r.event->mu);
      r.event->completed = std::max(r.event->completed, r.generation);
      r.event->device_unix_s = Now();
      r.event->done_cv.notify_all();
    }
  }
}

namespace joulepipe::sim_nvml {
namespace {

// Streams alive, so that handles can be checked and the process's exit
// joins their threads (this registry is created after the Library, so it is
// destroyed before it).
struct Streams {
  std::mutex mu;
  std::map<SimStream*, std::unique_ptr<SimStream>> all;
  static Streams& Get() {
    static Streams streams;
    return streams;
  }
  SimStream* Find(SimStream* s) {
    std::lock_guard<std::mutex> lock(mu);
    return all.count(s) ? s : nullptr;
  }
};

bool NvmlInitialised() {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  return lib.init_count > 0;
}

}  // namespace
}  // namespace joulepipe::sim_nvml

using joulepipe::sim_nvml::CUevent;
using joulepipe::sim_nvml::CUstream;
namespace sim = joulepipe::sim_nvml;

SIM_CUDA_EXPORT int nvmlJoulepipeSimStreamCreate(nvmlDevice_t device, unsigned depth,
                                                 CUstream* stream) {
  if (stream == nullptr || depth > 65536) return sim::kCudaErrorInvalidValue;
  unsigned index = 0;
  const nvmlReturn_t found =
      sim::WithDevice("nvmlJoulepipeSimStreamCreate", device, [&](sim::DeviceCall& c) {
        index = c.index();
        return NVML_SUCCESS;
      });
  if (found == NVML_ERROR_UNINITIALIZED) return sim::kCudaErrorNotInitialized;
  if (found != NVML_SUCCESS) return sim::kCudaErrorInvalidHandle;
  auto made = std::make_unique<SimStream>(device, index,
                                          depth == 0 ? sim::kDefaultLaunchQueueDepth : depth);
  *stream = made.get();
  sim::Streams& streams = sim::Streams::Get();
  std::lock_guard<std::mutex> lock(streams.mu);
  streams.all.emplace(made.get(), std::move(made));
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int nvmlJoulepipeSimStreamDestroy(CUstream stream) {
  std::unique_ptr<SimStream> owned;
  {
    sim::Streams& streams = sim::Streams::Get();
    std::lock_guard<std::mutex> lock(streams.mu);
    auto it = streams.all.find(stream);
    if (it == streams.all.end()) return sim::kCudaErrorInvalidHandle;
    owned = std::move(it->second);
    streams.all.erase(it);
  }
  owned.reset();  // drains, then joins the device thread
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int nvmlJoulepipeSimLaunchKernel(CUstream stream, double seconds_at_max_clock,
                                                 double compute_fraction, double activity) {
  SimStream* s = sim::Streams::Get().Find(stream);
  if (s == nullptr) return sim::kCudaErrorInvalidHandle;
  if (!(seconds_at_max_clock > 0 && seconds_at_max_clock <= 3600) ||
      !(compute_fraction >= 0 && compute_fraction <= 1) || !(activity >= 0) ||
      !std::isfinite(activity))
    return sim::kCudaErrorInvalidValue;
  if (!sim::NvmlInitialised()) return sim::kCudaErrorNotInitialized;
  s->Push(sim::Kernel{seconds_at_max_clock, compute_fraction, activity});
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuInit(unsigned flags) {
  return flags == 0 ? sim::kCudaSuccess : sim::kCudaErrorInvalidValue;
}

SIM_CUDA_EXPORT int cuStreamSynchronize(CUstream stream) {
  SimStream* s = sim::Streams::Get().Find(stream);
  if (s == nullptr) return sim::kCudaErrorInvalidHandle;
  s->Synchronize();
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventCreate(CUevent* event, unsigned /*flags*/) {
  if (event == nullptr) return sim::kCudaErrorInvalidValue;
  *event = new SimEventHandle;
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventRecord(CUevent event, CUstream stream) {
  if (event == nullptr) return sim::kCudaErrorInvalidHandle;
  SimStream* s = sim::Streams::Get().Find(stream);
  if (s == nullptr) return sim::kCudaErrorInvalidHandle;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(event->state->mu);
    generation = ++event->state->recorded;
  }
  s->Push(sim::Record{event->state, generation});
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventQuery(CUevent event) {
  if (event == nullptr) return sim::kCudaErrorInvalidHandle;
  std::lock_guard<std::mutex> lock(event->state->mu);
  // Never recorded counts as done, as in CUDA.
  return event->state->completed >= event->state->recorded ? sim::kCudaSuccess
                                                           : sim::kCudaErrorNotReady;
}

SIM_CUDA_EXPORT int cuEventSynchronize(CUevent event) {
  if (event == nullptr) return sim::kCudaErrorInvalidHandle;
  sim::EventState& e = *event->state;
  std::unique_lock<std::mutex> lock(e.mu);
  const std::uint64_t wanted = e.recorded;
  e.done_cv.wait(lock, [&] { return e.completed >= wanted; });
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  if (milliseconds == nullptr) return sim::kCudaErrorInvalidValue;
  if (start == nullptr || end == nullptr) return sim::kCudaErrorInvalidHandle;
  double t0 = 0, t1 = 0;
  for (auto [e, t] : {std::pair{start, &t0}, std::pair{end, &t1}}) {
    std::lock_guard<std::mutex> lock(e->state->mu);
    if (e->state->recorded == 0) return sim::kCudaErrorInvalidHandle;
    if (e->state->completed < e->state->recorded) return sim::kCudaErrorNotReady;
    *t = e->state->device_unix_s;
  }
  *milliseconds = static_cast<float>((t1 - t0) * 1e3);
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventDestroy(CUevent event) {
  if (event == nullptr) return sim::kCudaErrorInvalidHandle;
  delete event;  // a record still queued keeps the state alive
  return sim::kCudaSuccess;
}

SIM_CUDA_EXPORT int cuEventDestroy_v2(CUevent event) {
  return cuEventDestroy(event);
}
