// StepLogger: one window per step, one flushed CSV or JSONL line per step.
#include "joulepipe/monitor/step_logger.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "joulepipe/model/output_files.hpp"

namespace joulepipe::monitor {

namespace {

void AppendF(std::string* out, const char* format, double value) {
  char buffer[64];
  const int n = std::snprintf(buffer, sizeof buffer, format, value);
  out->append(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
}

void AppendNumber(std::string* out, double value) {
  AppendF(out, "%.10g", value);
}

}  // namespace

StepLogger::StepLogger(Monitor& monitor, StepLoggerOptions options)
    : monitor_(monitor), options_(std::move(options)) {
  line_.reserve(256 + 32 * static_cast<std::size_t>(monitor_.gpu_count()));
  if (options_.path.empty()) return;
  // Private to the user (model::kPrivateFileMode), like every file joulepipe
  // creates; an existing log keeps its mode.
  const int fd = ::open(options_.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        model::kPrivateFileMode);
  file_ = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (fd >= 0 && file_ == nullptr) ::close(fd);
  if (!file_) {
    throw model::InputError("cannot write the step log " + options_.path + ": " +
                            std::strerror(errno));
  }
  if (options_.format == LogFormat::kCsv) {
    line_ =
        "step,time_s,gpu_energy_j,cpu_energy_j,dram_energy_j,energy_j,avg_power_w,tokens,"
        "tokens_per_s,j_per_token,approximate";
    for (int i = 0; i < monitor_.gpu_count(); ++i) {
      line_ += ",gpu" + std::to_string(monitor_.gpu_index(i)) + "_energy_j";
    }
    line_ += '\n';
    std::fwrite(line_.data(), 1, line_.size(), file_);
    std::fflush(file_);
  }
}

StepLogger::~StepLogger() {
  if (monitor_.IsOpen(options_.window_name)) {
    try {
      monitor_.End(options_.window_name, &record_.measurement);
    } catch (...) {
    }
  }
  if (file_) std::fclose(file_);
}

void StepLogger::BeginStep() {
  monitor_.Begin(options_.window_name, Edges::kCheap);
}

const StepRecord& StepLogger::EndStep(double tokens) {
  monitor_.End(options_.window_name, &record_.measurement);
  const Measurement& m = record_.measurement;
  record_.step = summary_.steps;
  record_.tokens = tokens < 0 ? options_.tokens_per_step : tokens;
  const double energy = m.total_energy_j();
  record_.avg_power_w = m.duration_s > 0 ? energy / m.duration_s : 0;
  record_.tokens_per_s = record_.tokens > 0 && m.duration_s > 0 ? record_.tokens / m.duration_s : 0;
  record_.j_per_token = record_.tokens > 0 ? energy / record_.tokens : 0;

  ++summary_.steps;
  summary_.time_s += m.duration_s;
  summary_.gpu_energy_j += m.gpu_energy_j;
  summary_.energy_j += energy;
  summary_.tokens += record_.tokens;
  if (m.approximate()) ++summary_.approximate_steps;
  if (file_) WriteLine();
  return record_;
}

void StepLogger::WriteLine() {
  const Measurement& m = record_.measurement;
  const bool csv = options_.format == LogFormat::kCsv;
  const bool has_tokens = record_.tokens > 0;
  line_.clear();
  // Emits `key` (JSONL) or nothing (CSV), then the value or empty/null.
  auto field = [&](const char* key, bool present, double value, bool first = false) {
    if (csv) {
      if (!first) line_ += ',';
    } else {
      line_ += first ? "{\"" : ",\"";
      line_ += key;
      line_ += "\":";
    }
    if (present) {
      AppendNumber(&line_, value);
    } else if (!csv) {
      line_ += "null";
    }
  };
  field("step", true, static_cast<double>(record_.step), true);
  field("time_s", true, m.duration_s);
  field("gpu_energy_j", true, m.gpu_energy_j);
  field("cpu_energy_j", m.cpu_measured, m.cpu_energy_j);
  field("dram_energy_j", m.cpu_measured, m.dram_energy_j);
  field("energy_j", true, m.total_energy_j());
  field("avg_power_w", true, record_.avg_power_w);
  field("tokens", has_tokens, record_.tokens);
  field("tokens_per_s", has_tokens, record_.tokens_per_s);
  field("j_per_token", has_tokens, record_.j_per_token);
  if (csv) {
    line_ += m.approximate() ? ",1" : ",0";
    for (const GpuEnergy& g : m.gpus) {
      line_ += ',';
      AppendNumber(&line_, g.energy_j);
    }
    line_ += '\n';
  } else {
    line_ += m.approximate() ? ",\"approximate\":true" : ",\"approximate\":false";
    line_ += ",\"gpus_energy_j\":[";
    for (std::size_t i = 0; i < m.gpus.size(); ++i) {
      if (i > 0) line_ += ',';
      AppendNumber(&line_, m.gpus[i].energy_j);
    }
    line_ += "]}\n";
  }
  if (std::fwrite(line_.data(), 1, line_.size(), file_) != line_.size() ||
      std::fflush(file_) != 0) {
    throw model::InputError("cannot write the step log " + options_.path + ": " +
                            std::strerror(errno));
  }
}

std::string StepLogger::FormatSummary() const {
  const StepSummary& s = summary_;
  char buffer[512];
  std::snprintf(buffer, sizeof buffer,
                "%lld steps in %.3f s: energy %.3f J (%s; GPU %.3f J), average power %.2f W",
                static_cast<long long>(s.steps), s.time_s, s.energy_j, monitor_.scope(),
                s.gpu_energy_j, s.avg_power_w());
  std::string out = buffer;
  if (s.tokens > 0) {
    std::snprintf(buffer, sizeof buffer, ", %.1f tokens/s, %.6g J/token", s.tokens_per_s(),
                  s.j_per_token());
    out += buffer;
  }
  out += "\n";
  if (s.approximate_steps > 0) {
    std::snprintf(buffer, sizeof buffer,
                  "%lld steps were shorter than the energy counter's update period: their "
                  "energy is instant power x duration (approximate)\n",
                  static_cast<long long>(s.approximate_steps));
    out += buffer;
  }
  out += "Methodology: " + monitor_.methodology() + "\n";
  return out;
}

}  // namespace joulepipe::monitor
