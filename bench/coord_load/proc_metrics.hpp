// What the bench reads about the server: its /proc figures (RSS, threads,
// CPU) and its /metrics (counters and the routes' latency histograms).
// Included by bench/coord_load.cpp only (one translation unit).
#pragma once

#include "common.hpp"

namespace {

// ---- /proc sampling -----------------------------------------------------------

struct ProcStatus {
  long hwm_kb = -1, rss_kb = -1;
  int threads = -1;
};

ProcStatus ReadProcStatus(const std::string& path) {
  ProcStatus s;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kb = std::atol(line.c_str() + 6);
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::atol(line.c_str() + 6);
    if (line.rfind("Threads:", 0) == 0) s.threads = std::atoi(line.c_str() + 8);
  }
  return s;
}

// CPU seconds (user + system) used so far by the server and by this bench:
// the two share the machine's cores, so the bench's own share matters when
// reading its latencies.
struct CpuMark {
  double server_s = 0, client_s = 0;
};

CpuMark ReadCpu(pid_t server) {
  CpuMark m;
  std::ifstream in("/proc/" + std::to_string(server) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    // After "pid (comm)": state is field 3; utime and stime are fields 14, 15.
    std::istringstream fields(stat.substr(paren + 2));
    std::string f;
    unsigned long long utime = 0, stime = 0;
    for (int k = 3; k <= 15 && fields >> f; ++k) {
      if (k == 14) utime = std::strtoull(f.c_str(), nullptr, 10);
      if (k == 15) stime = std::strtoull(f.c_str(), nullptr, 10);
    }
    m.server_s = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  m.client_s = self.ru_utime.tv_sec + self.ru_utime.tv_usec * 1e-6 + self.ru_stime.tv_sec +
               self.ru_stime.tv_usec * 1e-6;
  return m;
}

// Phases of the run, for the samples.
enum Phase { kSetup, kRanks, kAwaiting, kIterations, kDone };
std::atomic<int> g_phase{kSetup};

struct ProcPeaks {
  long hwm_kb = 0, rss_kb = 0, hwm_kb_awaiting = 0;
  int threads = 0, threads_awaiting = 0, threads_iterations = 0;
  int client_threads = 0;
  int samples = 0;
};

// ---- /metrics parsing ---------------------------------------------------------

// The value of the first sample line "<name> <value>" (no labels).
std::optional<double> MetricValue(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::strtod(line.c_str() + name.size() + 1, nullptr);
  }
  return std::nullopt;
}

// The server's request-duration histogram per route: p50 and p99 as the
// upper bound of the bucket that holds them, and the count.
struct ServerRoute {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
  double count = 0, sum = 0;
};

std::map<std::string, ServerRoute> ServerHistograms(const std::string& text,
                                                    const std::string& metric) {
  std::map<std::string, ServerRoute> out;
  std::istringstream in(text);
  std::string line;
  auto route_of = [](const std::string& l) {
    const std::size_t a = l.find("route=\"");
    if (a == std::string::npos) return std::string();
    const std::size_t b = l.find('"', a + 7);
    return l.substr(a + 7, b - a - 7);
  };
  while (std::getline(in, line)) {
    if (line.rfind(metric + "_bucket{", 0) == 0) {
      const std::size_t le = line.find("le=\"");
      const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
      const double b = bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr);
      const double n = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
      out[route_of(line)].buckets.emplace_back(b, n);
    } else if (line.rfind(metric + "_count{", 0) == 0) {
      out[route_of(line)].count = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    } else if (line.rfind(metric + "_sum{", 0) == 0) {
      out[route_of(line)].sum = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    }
  }
  return out;
}

double BucketQuantile(const ServerRoute& r, double q) {
  for (const auto& [le, n] : r.buckets) {
    if (n >= q * r.count) return le;
  }
  return INFINITY;
}

}  // namespace
