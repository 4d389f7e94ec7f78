// Measurement windows: per-GPU energy from the NVML counter (cheap or
// tick-aligned edges) or from the sampler thread's power integral, CPU
// package and DRAM from RAPL, and the methodology text every report carries.
#include "joulepipe/monitor/monitor.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"

namespace joulepipe::monitor {

namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Detection of a counter update: the poll loop sleeps this long between rounds.
constexpr auto kAlignPoll = std::chrono::microseconds(200);

class NvmlGpuMeter final : public GpuMeter {
 public:
  explicit NvmlGpuMeter(gpu::Device device) : device_(std::move(device)) {}
  int index() const override { return device_.visible_index(); }
  std::string name() const override { return device_.name(); }
  std::optional<uint64_t> ReadEnergyMj() const override {
    const std::optional<gpu::EnergyReading> r = device_.ReadEnergy();
    if (!r) return std::nullopt;
    return r->millijoules;
  }
  double ReadPowerW() const override { return device_.InstantPower().watts(); }
  int ReadSmClockMhz() const override {
    try {
      return device_.CurrentClock(gpu::ClockDomain::kSm);
    } catch (const std::exception&) {
      return 0;
    }
  }

 private:
  gpu::Device device_;
};

std::string IndexList(const std::vector<int>& indices) {
  std::string out;
  for (int i : indices) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

std::string PeriodText(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g ms", seconds * 1e3);
  return buffer;
}

}  // namespace

const char* EnergySourceName(EnergySource source) {
  switch (source) {
    case EnergySource::kCounter:
      return "counter";
    case EnergySource::kSampling:
      return "sampling";
    case EnergySource::kInstantApprox:
      return "instant-approx";
  }
  return "?";
}

bool Measurement::approximate() const {
  return std::any_of(gpus.begin(), gpus.end(), [](const GpuEnergy& g) { return g.approximate; });
}

bool Measurement::complete() const {
  return std::none_of(gpus.begin(), gpus.end(), [](const GpuEnergy& g) { return g.failed; });
}

std::unique_ptr<GpuMeter> NvmlGpuMeterByNvmlIndex(int nvml_index) {
  return std::make_unique<NvmlGpuMeter>(gpu::DeviceByNvmlIndex(nvml_index));
}

std::vector<std::unique_ptr<GpuMeter>> NvmlGpuMeters(
    const std::optional<std::vector<int>>& indices) {
  std::vector<std::unique_ptr<GpuMeter>> meters;
  if (indices && indices->empty()) return meters;
  gpu::DeviceList list = gpu::ListVisibleDevices(gpu::MigPolicy::kRefuse);
  const int n = static_cast<int>(list.devices.size());
  if (!indices) {
    for (gpu::Device& d : list.devices) meters.push_back(std::make_unique<NvmlGpuMeter>(d));
    return meters;
  }
  std::vector<int> seen;
  for (int i : *indices) {
    if (i < 0 || i >= n) {
      std::string visible = n == 0 ? "none" : n == 1 ? "0" : "0-" + std::to_string(n - 1);
      std::string message = "GPU " + std::to_string(i) +
                            " is not visible (visible GPUs: " + visible +
                            ", numbered as CUDA numbers them under " + "CUDA_VISIBLE_DEVICES)";
      if (!list.visible_devices_note.empty()) message += "; " + list.visible_devices_note;
      throw model::InputError(message);
    }
    if (std::find(seen.begin(), seen.end(), i) != seen.end()) {
      throw model::InputError("GPU " + std::to_string(i) + " is listed twice");
    }
    seen.push_back(i);
    meters.push_back(std::make_unique<NvmlGpuMeter>(list.devices[i]));
  }
  return meters;
}

// ---- State ----------------------------------------------------------------------

struct Monitor::State {
  struct Gpu {
    std::unique_ptr<GpuMeter> meter;
    int index = 0;
    bool has_counter = false;
    int sampler = -1;     // slot in `sampled`, -1 if the sampler does not read it
    double period_s = 0;  // the counter's or the sampler's period
  };
  // One GPU the sampler thread reads; guarded by sampler_mutex.
  struct Sampled {
    Clock::time_point t_last;
    double p_last = 0;
    double energy_j = 0;  // trapezoid integral up to t_last
    double max_w = 0;
    int64_t samples = 0;
    // Only with tolerate_gpu_failures: whether the latest read of what the
    // GPU's energy comes from (counter, or power) failed, and why; and the
    // latest good counter reading (counter GPUs).
    bool failing = false;
    std::string error;
    bool has_counter_reading = false;
    double counter_j = 0;
    Clock::time_point counter_t;
  };
  struct Window {
    std::string name;
    bool open = false;
    Edges edges = Edges::kCheap;
    Clock::time_point t0;
    std::vector<double> e0;     // per GPU: J on the counter or sampler scale
    std::vector<double> s0;     // per GPU: J on the sampler scale (short_windows_sampled)
    std::vector<char> aligned;  // per GPU
    std::vector<uint64_t> rapl0;
  };
  // A counter update seen by AwaitTicks.
  struct Tick {
    bool seen = false;
    double energy_j = 0;
    Clock::time_point t;  // midpoint between the last read before and the read after
    double power_w = 0;   // instant power read right after
  };

  MonitorOptions options;
  std::vector<Gpu> gpus;
  std::unique_ptr<RaplCounters> rapl;
  std::string cpu_note;
  std::vector<int> cpu_of_zone;  // zone -> index in Measurement::cpus
  std::vector<CpuEnergy> cpu_template;
  std::string methodology;
  const char* scope = "GPU-only";

  std::vector<Window> windows;
  std::vector<Tick> ticks;            // scratch for AwaitTicks, one per GPU
  std::vector<std::string> failure;   // scratch for End: why GPU i failed, or ""
  std::vector<double> p1;             // scratch for End: power at t1, per GPU
  std::vector<uint64_t> rapl_now;     // scratch for End
  std::vector<uint64_t> rapl_thread;  // scratch for the sampler thread

  mutable std::mutex sampler_mutex;
  std::vector<Sampled> sampled;
  std::condition_variable sampler_wake;
  bool stop = false;  // guarded by sampler_mutex
  std::thread sampler_thread;

  State(std::vector<std::unique_ptr<GpuMeter>> meters, const MonitorOptions& o);
  ~State();

  void TakeSample();
  void SamplerLoop();
  double SampledEnergyAt(int slot, Clock::time_point t) const;
  // Waits until the counter of every counter GPU with want[i] has changed
  // from its first reading here, at most options.align_timeout_s. With
  // `tolerate`, a GPU whose read fails gets its failure[i] and is skipped
  // (as is one that already has one); otherwise the failure throws.
  void AwaitTicks(const std::vector<char>& want, bool tolerate);
  // GPU i failed in window w (failure[i]): its energy up to the last good
  // reading the sampler took.
  void FillFailed(std::size_t i, const Window& w, GpuEnergy* ge) const;
  Window* Find(std::string_view name);
  void BuildMethodology();
};

Monitor::State::State(std::vector<std::unique_ptr<GpuMeter>> meters, const MonitorOptions& o)
    : options(o) {
  if (!(options.sampling_period_s > 0) || !std::isfinite(options.sampling_period_s)) {
    throw model::InputError("the sampling period must be > 0 s");
  }
  if (!(options.counter_period_s > 0) || !std::isfinite(options.counter_period_s)) {
    throw model::InputError("the counter period must be > 0 s");
  }
  for (std::unique_ptr<GpuMeter>& meter : meters) {
    Gpu g;
    g.index = meter->index();
    g.has_counter = !options.force_sampling && meter->ReadEnergyMj().has_value();
    g.meter = std::move(meter);
    if (!g.has_counter || options.sample_all_gpus || options.short_windows_sampled ||
        options.tolerate_gpu_failures) {
      g.sampler = static_cast<int>(sampled.size());
      sampled.emplace_back();
    }
    g.period_s = g.has_counter ? options.counter_period_s : options.sampling_period_s;
    gpus.push_back(std::move(g));
  }

  if (options.cpu != CpuMode::kOff) {
    auto counters = std::make_unique<RaplCounters>(options.rapl_root);
    if (counters->available()) {
      rapl = std::move(counters);
      for (const RaplZone& zone : rapl->zones()) {
        int at = -1;
        for (std::size_t c = 0; c < cpu_template.size(); ++c)
          if (cpu_template[c].socket == zone.socket) at = static_cast<int>(c);
        if (at < 0) {
          at = static_cast<int>(cpu_template.size());
          cpu_template.push_back(CpuEnergy{zone.socket, 0, false, 0});
        }
        if (zone.domain == RaplDomain::kDram) cpu_template[at].has_dram = true;
        cpu_of_zone.push_back(at);
      }
      rapl_now.resize(rapl->zones().size());
      rapl_thread.resize(rapl->zones().size());
    } else if (options.cpu == CpuMode::kRequired) {
      throw RaplUnavailableError("CPU energy was requested but RAPL is not readable: " +
                                 counters->problem());
    } else {
      cpu_note = "CPU and DRAM not measured: " + counters->problem();
    }
  }
  BuildMethodology();

  ticks.resize(gpus.size());
  failure.resize(gpus.size());
  p1.resize(gpus.size());
  windows.resize(4);
  for (Window& w : windows) {
    w.name.reserve(64);
    w.e0.resize(gpus.size());
    w.s0.resize(gpus.size());
    w.aligned.resize(gpus.size());
    w.rapl0.resize(rapl_now.size());
  }

  if (!sampled.empty() || rapl) {
    TakeSample();  // every sampled GPU has a reading from here on
    sampler_thread = std::thread([this] { SamplerLoop(); });
  }
}

Monitor::State::~State() {
  {
    std::lock_guard<std::mutex> lock(sampler_mutex);
    stop = true;
  }
  sampler_wake.notify_all();
  if (sampler_thread.joinable()) sampler_thread.join();
}

void Monitor::State::BuildMethodology() {
  std::vector<int> counter, sampling;
  for (const Gpu& g : gpus) (g.has_counter ? counter : sampling).push_back(g.index);
  std::string text;
  if (!counter.empty()) {
    text += "GPU " + IndexList(counter) + ": NVML energy counter (updated every ~" +
            PeriodText(options.counter_period_s) + ")";
    if (options.short_windows_sampled) {
      text += ", windows under " + PeriodText(kCounterPeriodsForExact * options.counter_period_s) +
              " from power samples every " + PeriodText(options.sampling_period_s) +
              " taken during them";
    }
  }
  if (!sampling.empty()) {
    if (!text.empty()) text += "; ";
    text += "GPU " + IndexList(sampling) + ": power sampling every " +
            PeriodText(options.sampling_period_s) + ", trapezoid integral (" +
            (options.force_sampling ? "sampling forced" : "no energy counter") + ")";
  }
  if (gpus.empty()) text += "no GPU measured";
  bool dram = false;
  if (rapl) {
    std::vector<int> sockets;
    for (const CpuEnergy& c : cpu_template) {
      sockets.push_back(c.socket);
      dram = dram || c.has_dram;
    }
    text += std::string("; CPU: RAPL package") + (dram ? "+dram" : "") + " energy, socket" +
            (sockets.size() > 1 ? "s " : " ") + IndexList(sockets) + " (" + rapl->root() + ")";
  }
  if (gpus.empty()) {
    scope = rapl ? (dram ? "CPU+DRAM" : "CPU-only") : "nothing";
  } else {
    scope = rapl ? (dram ? "GPU+CPU+DRAM" : "GPU+CPU") : "GPU-only";
  }
  text += std::string("; totals are ") + scope + ".";
  if (!cpu_note.empty()) text += " " + cpu_note + ".";
  methodology = std::move(text);
}

void Monitor::State::TakeSample() {
  const bool tolerate = options.tolerate_gpu_failures;
  for (const Gpu& g : gpus) {
    if (g.sampler < 0) continue;
    double p = 0;
    bool power_ok = true, counter_ok = true;
    std::optional<uint64_t> counter_mj;
    std::string error;
    try {
      p = g.meter->ReadPowerW();
    } catch (const std::exception& e) {
      // A failed read leaves the integral extrapolating the last power.
      if (!tolerate) continue;
      power_ok = false;
      error = e.what();
    }
    if (tolerate && g.has_counter) {
      try {
        counter_mj = g.meter->ReadEnergyMj();
      } catch (const std::exception& e) {
        counter_ok = false;
        error = e.what();
      }
    }
    const Clock::time_point t = Clock::now();
    std::lock_guard<std::mutex> lock(sampler_mutex);
    Sampled& s = sampled[g.sampler];
    if (tolerate) {
      s.failing = !(g.has_counter ? counter_ok : power_ok);
      if (s.failing) s.error = error;
      if (counter_mj) {
        s.has_counter_reading = true;
        s.counter_j = static_cast<double>(*counter_mj) * 1e-3;
        s.counter_t = t;
      }
    }
    if (!power_ok) continue;
    if (s.samples > 0) s.energy_j += 0.5 * (s.p_last + p) * Seconds(t - s.t_last);
    s.t_last = t;
    s.p_last = p;
    s.max_w = s.samples > 0 ? std::max(s.max_w, p) : p;
    ++s.samples;
  }
  if (rapl) rapl->Sample(rapl_thread);  // keeps the running totals across wraps
}

void Monitor::State::SamplerLoop() {
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.sampling_period_s));
  Clock::time_point next = Clock::now() + period;
  std::unique_lock<std::mutex> lock(sampler_mutex);
  while (!stop) {
    if (sampler_wake.wait_until(lock, next, [this] { return stop; })) break;
    lock.unlock();
    TakeSample();
    const Clock::time_point now = Clock::now();
    next += period;
    if (next <= now) next = now + period;  // fell behind: skip, do not burst
    lock.lock();
  }
}

double Monitor::State::SampledEnergyAt(int slot, Clock::time_point t) const {
  std::lock_guard<std::mutex> lock(sampler_mutex);
  const Sampled& s = sampled[slot];
  return s.energy_j + s.p_last * Seconds(t - s.t_last);
}

void Monitor::State::AwaitTicks(const std::vector<char>& want, bool tolerate) {
  const std::size_t n = gpus.size();
  std::vector<double> first(n, 0);
  std::vector<Clock::time_point> last_read(n);
  std::vector<char> waiting(n, 0);
  std::size_t pending = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ticks[i] = Tick{};
    if (!want[i] || (tolerate && !failure[i].empty())) continue;
    try {
      first[i] = static_cast<double>(*gpus[i].meter->ReadEnergyMj()) * 1e-3;
    } catch (const std::exception& e) {
      if (!tolerate) throw;
      failure[i] = e.what();
      continue;
    }
    last_read[i] = Clock::now();
    waiting[i] = 1;
    ++pending;
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.align_timeout_s));
  while (pending > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(kAlignPoll);
    for (std::size_t i = 0; i < n; ++i) {
      if (!waiting[i]) continue;
      try {
        const double e = static_cast<double>(*gpus[i].meter->ReadEnergyMj()) * 1e-3;
        const Clock::time_point t = Clock::now();
        if (e != first[i]) {
          ticks[i].energy_j = e;
          ticks[i].t = last_read[i] + (t - last_read[i]) / 2;
          ticks[i].power_w = gpus[i].meter->ReadPowerW();
          ticks[i].seen = true;
          waiting[i] = 0;
          --pending;
        }
        last_read[i] = t;
      } catch (const std::exception& e) {
        if (!tolerate) throw;
        failure[i] = e.what();
        ticks[i] = Tick{};
        waiting[i] = 0;
        --pending;
      }
    }
  }
}

void Monitor::State::FillFailed(std::size_t i, const Window& w, GpuEnergy* ge) const {
  const Gpu& g = gpus[i];
  ge->failed = true;
  ge->error = failure[i];
  ge->energy_j = 0;
  ge->measured_s = 0;
  ge->aligned = false;
  ge->approximate = false;
  ge->source = g.has_counter ? EnergySource::kCounter : EnergySource::kSampling;
  if (g.sampler < 0) return;
  std::lock_guard<std::mutex> lock(sampler_mutex);
  const Sampled& s = sampled[g.sampler];
  if (g.has_counter && s.has_counter_reading && s.counter_t > w.t0) {
    ge->energy_j = std::max(0.0, s.counter_j - w.e0[i]);
    ge->measured_s = Seconds(s.counter_t - w.t0);
  } else if (!g.has_counter && s.samples > 0 && s.t_last > w.t0) {
    ge->energy_j = std::max(0.0, s.energy_j - w.e0[i]);
    ge->measured_s = Seconds(s.t_last - w.t0);
  }
}

Monitor::State::Window* Monitor::State::Find(std::string_view name) {
  for (Window& w : windows)
    if (w.open && w.name == name) return &w;
  return nullptr;
}

// ---- Monitor --------------------------------------------------------------------

Monitor::Monitor(const MonitorOptions& options) : Monitor(NvmlGpuMeters(options.gpus), options) {}

Monitor::Monitor(std::vector<std::unique_ptr<GpuMeter>> meters, const MonitorOptions& options)
    : state_(std::make_unique<State>(std::move(meters), options)) {}

Monitor::~Monitor() = default;

void Monitor::Begin(std::string_view name, Edges edges) {
  State& s = *state_;
  if (s.Find(name)) {
    throw WindowError("measurement window '" + std::string(name) +
                      "' is already open; End it first or use another name");
  }
  State::Window* w = nullptr;
  for (State::Window& candidate : s.windows) {
    if (!candidate.open) {
      w = &candidate;
      break;
    }
  }
  if (!w) {  // more windows open at once than ever before: grow
    s.windows.emplace_back();
    w = &s.windows.back();
    w->e0.resize(s.gpus.size());
    w->s0.resize(s.gpus.size());
    w->aligned.resize(s.gpus.size());
    w->rapl0.resize(s.rapl_now.size());
  }
  w->name.assign(name.data(), name.size());
  w->edges = edges;
  const std::size_t n = s.gpus.size();

  if (edges == Edges::kAligned) {
    for (std::size_t i = 0; i < n; ++i) w->aligned[i] = s.gpus[i].has_counter;
    s.AwaitTicks(w->aligned, /*tolerate=*/false);
  }
  w->t0 = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const State::Gpu& g = s.gpus[i];
    if (!g.has_counter) {
      w->aligned[i] = false;
      w->e0[i] = s.SampledEnergyAt(g.sampler, w->t0);
    } else if (edges == Edges::kAligned && s.ticks[i].seen) {
      // Energy at t0 = the update's value + what was drawn since it, at the
      // mean of the power just after the update and now.
      const State::Tick& tick = s.ticks[i];
      const double p0 = g.meter->ReadPowerW();
      w->e0[i] = tick.energy_j + 0.5 * (tick.power_w + p0) * Seconds(w->t0 - tick.t);
    } else {
      w->aligned[i] = false;
      w->e0[i] = static_cast<double>(*g.meter->ReadEnergyMj()) * 1e-3;
    }
  }
  if (s.options.short_windows_sampled) {
    for (std::size_t i = 0; i < n; ++i) {
      const State::Gpu& g = s.gpus[i];
      w->s0[i] = g.sampler >= 0 ? s.SampledEnergyAt(g.sampler, w->t0) : 0;
    }
  }
  if (s.rapl) s.rapl->Sample(w->rapl0);
  w->open = true;
}

Measurement Monitor::End(std::string_view name) {
  Measurement m;
  End(name, &m);
  return m;
}

void Monitor::End(std::string_view name, Measurement* out) {
  State& s = *state_;
  const Clock::time_point t1 = Clock::now();
  State::Window* w = s.Find(name);
  if (!w) {
    std::string open;
    for (const State::Window& candidate : s.windows)
      if (candidate.open) open += (open.empty() ? "'" : ", '") + candidate.name + "'";
    throw WindowError("no open measurement window '" + std::string(name) +
                      "' (open: " + (open.empty() ? "none" : open) + "); call Begin first");
  }
  if (s.rapl) s.rapl->Sample(s.rapl_now);
  const double duration = Seconds(t1 - w->t0);
  const std::size_t n = s.gpus.size();

  out->name.assign(name.data(), name.size());
  out->duration_s = duration;
  out->gpus.resize(n);
  out->gpu_energy_j = 0;

  // With tolerate_gpu_failures a GPU whose read fails gets failure[i] and
  // FillFailed instead of making End throw.
  const bool tolerate = s.options.tolerate_gpu_failures;
  for (std::string& failure : s.failure) failure.clear();
  if (tolerate) {
    // A counterless GPU's energy is the sampler's: its latest read decides.
    std::lock_guard<std::mutex> lock(s.sampler_mutex);
    for (std::size_t i = 0; i < n; ++i) {
      const State::Gpu& g = s.gpus[i];
      if (!g.has_counter && s.sampled[g.sampler].failing) s.failure[i] = s.sampled[g.sampler].error;
    }
  }
  // Aligned edge at the end: powers at t1 first, then wait for the updates.
  if (w->edges == Edges::kAligned) {
    for (std::size_t i = 0; i < n; ++i) {
      s.p1[i] = 0;
      if (!w->aligned[i] || !s.failure[i].empty()) continue;
      try {
        s.p1[i] = s.gpus[i].meter->ReadPowerW();
      } catch (const std::exception& e) {
        if (!tolerate) throw;
        s.failure[i] = e.what();
      }
    }
    s.AwaitTicks(w->aligned, tolerate);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const State::Gpu& g = s.gpus[i];
    GpuEnergy& ge = out->gpus[i];
    ge = GpuEnergy{};
    ge.index = g.index;
    ge.measured_s = duration;
    ge.approximate = duration < g.period_s;
    try {
      if (!s.failure[i].empty()) {
        // Failed above; FillFailed below.
      } else if (w->edges == Edges::kAligned && w->aligned[i] && s.ticks[i].seen) {
        // Energy at t1 = the update's value - what was drawn between t1 and it.
        const State::Tick& tick = s.ticks[i];
        const double e1 = tick.energy_j - 0.5 * (s.p1[i] + tick.power_w) * Seconds(tick.t - t1);
        ge.energy_j = e1 - w->e0[i];
        ge.source = EnergySource::kCounter;
        ge.aligned = true;
      } else if (s.options.short_windows_sampled && g.sampler >= 0 &&
                 duration < kCounterPeriodsForExact * g.period_s) {
        ge.energy_j = s.SampledEnergyAt(g.sampler, t1) - w->s0[i];
        ge.source = EnergySource::kSampling;
        ge.approximate = duration < kCounterPeriodsForExact * s.options.sampling_period_s;
      } else if (ge.approximate) {
        ge.energy_j = g.meter->ReadPowerW() * duration;
        ge.source = EnergySource::kInstantApprox;
      } else if (g.has_counter) {
        ge.energy_j = static_cast<double>(*g.meter->ReadEnergyMj()) * 1e-3 - w->e0[i];
        ge.source = EnergySource::kCounter;
        // Unaligned edges are each off by up to one update's energy: below
        // kCounterPeriodsForExact updates the error can pass ±20 % (a 150 ms
        // window read 526 W where 390 W was drawn), so it is flagged.
        if (duration < kCounterPeriodsForExact * g.period_s) ge.approximate = true;
      } else {
        ge.energy_j = s.SampledEnergyAt(g.sampler, t1) - w->e0[i];
        ge.source = EnergySource::kSampling;
      }
    } catch (const std::exception& e) {
      if (!tolerate) throw;
      s.failure[i] = e.what();
    }
    if (!s.failure[i].empty()) s.FillFailed(i, *w, &ge);
    out->gpu_energy_j += ge.energy_j;
  }

  out->cpu_measured = s.rapl != nullptr;
  out->cpus.resize(s.cpu_template.size());
  std::copy(s.cpu_template.begin(), s.cpu_template.end(), out->cpus.begin());
  out->cpu_energy_j = 0;
  out->dram_energy_j = 0;
  if (s.rapl) {
    const std::vector<RaplZone>& zones = s.rapl->zones();
    for (std::size_t z = 0; z < zones.size(); ++z) {
      const double j = static_cast<double>(s.rapl_now[z] - w->rapl0[z]) * 1e-6;
      CpuEnergy& c = out->cpus[s.cpu_of_zone[z]];
      if (zones[z].domain == RaplDomain::kPackage) {
        c.package_j += j;
        out->cpu_energy_j += j;
      } else {
        c.dram_j += j;
        out->dram_energy_j += j;
      }
    }
  }
  out->methodology.assign(s.methodology);
  w->open = false;
}

bool Monitor::IsOpen(std::string_view name) const {
  for (const State::Window& w : state_->windows)
    if (w.open && w.name == name) return true;
  return false;
}

int Monitor::gpu_count() const {
  return static_cast<int>(state_->gpus.size());
}
int Monitor::gpu_index(int i) const {
  return state_->gpus.at(i).index;
}
std::string Monitor::gpu_name(int i) const {
  return state_->gpus.at(i).meter->name();
}
EnergySource Monitor::gpu_source(int i) const {
  return state_->gpus.at(i).has_counter ? EnergySource::kCounter : EnergySource::kSampling;
}
bool Monitor::cpu_measured() const {
  return state_->rapl != nullptr;
}
const RaplCounters* Monitor::rapl() const {
  return state_->rapl.get();
}
const std::string& Monitor::cpu_note() const {
  return state_->cpu_note;
}
const std::string& Monitor::methodology() const {
  return state_->methodology;
}
const char* Monitor::scope() const {
  return state_->scope;
}

std::optional<double> Monitor::LatestPower(int i) const {
  const State::Gpu& g = state_->gpus.at(i);
  if (g.sampler < 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(state_->sampler_mutex);
  const State::Sampled& s = state_->sampled[g.sampler];
  if (s.samples == 0) return std::nullopt;
  return s.p_last;
}

std::optional<double> Monitor::MaxPower(int i) const {
  const State::Gpu& g = state_->gpus.at(i);
  if (g.sampler < 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(state_->sampler_mutex);
  const State::Sampled& s = state_->sampled[g.sampler];
  if (s.samples == 0) return std::nullopt;
  return s.max_w;
}

}  // namespace joulepipe::monitor
