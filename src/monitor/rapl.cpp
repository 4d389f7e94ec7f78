// RAPL zone discovery under a powercap root and wrap-aware running totals.
#include "joulepipe/monitor/rapl.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

namespace joulepipe::monitor {

namespace fs = std::filesystem;

namespace {

constexpr char kZonePrefix[] = "intel-rapl:";

// "intel-rapl:N" -> {N, -1}; "intel-rapl:N:M" -> {N, M}; anything else
// (intel-rapl-mmio:N, the "intel-rapl" control type itself) -> nullopt.
std::optional<std::pair<int, int>> ParseZoneDir(const std::string& dir) {
  if (dir.rfind(kZonePrefix, 0) != 0) return std::nullopt;
  const char* p = dir.data() + std::strlen(kZonePrefix);
  const char* end = dir.data() + dir.size();
  int n = 0, m = -1;
  auto r = std::from_chars(p, end, n);
  if (r.ec != std::errc() || r.ptr == p) return std::nullopt;
  if (r.ptr != end) {
    if (*r.ptr != ':') return std::nullopt;
    const char* q = r.ptr + 1;
    auto r2 = std::from_chars(q, end, m);
    if (r2.ec != std::errc() || r2.ptr == q || r2.ptr != end) return std::nullopt;
  }
  return std::make_pair(n, m);
}

std::string FirstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

bool ParseUint(const std::string& text, uint64_t* value) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  while (end > begin && (end[-1] == '\n' || end[-1] == ' ')) --end;
  auto r = std::from_chars(begin, end, *value);
  return r.ec == std::errc() && r.ptr == end && end != begin;
}

std::string PermissionFix(const std::string& root) {
  return "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694); grant read "
         "access with `sudo chmod a+r " +
         root +
         "/intel-rapl:*/energy_uj` (until reboot; a udev rule makes it permanent) or "
         "run as root";
}

}  // namespace

const char* RaplDomainName(RaplDomain domain) {
  return domain == RaplDomain::kPackage ? "package" : "dram";
}

uint64_t RaplDeltaUj(uint64_t before, uint64_t after, uint64_t max_energy_range_uj) {
  if (after >= before) return after - before;
  // One wrap: the counter went from `before` up to max_energy_range_uj, then
  // to 0 (one more step), then up to `after`.
  return (max_energy_range_uj - before) + 1 + after;
}

RaplCounters::RaplCounters(const std::string& root) : root_(root) {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) {
    problem_ = "no RAPL powercap interface at " + root_ +
               " (not Linux, no intel_rapl driver loaded, or a virtual machine without RAPL)";
    return;
  }
  struct Found {
    RaplZone zone;
    int n = 0, m = -1;
  };
  std::vector<Found> found;
  std::vector<std::pair<int, int>> package_of_dir;  // N -> K of "package-K"
  for (const fs::directory_entry& entry : fs::directory_iterator(root_, ec)) {
    const std::string dir = entry.path().filename().string();
    const auto nm = ParseZoneDir(dir);
    if (!nm) continue;
    const std::string name = FirstLine(entry.path() / "name");
    Found f;
    f.n = nm->first;
    f.m = nm->second;
    f.zone.path = entry.path().string();
    f.zone.name = name;
    if (name.rfind("package", 0) == 0 && f.m < 0) {
      f.zone.domain = RaplDomain::kPackage;
      int k = f.n;
      const std::size_t dash = name.find('-');
      if (dash != std::string::npos) {
        int parsed = 0;
        auto r = std::from_chars(name.data() + dash + 1, name.data() + name.size(), parsed);
        if (r.ec == std::errc()) k = parsed;
      }
      f.zone.socket = k;
      package_of_dir.emplace_back(f.n, k);
    } else if (name == "dram") {
      f.zone.domain = RaplDomain::kDram;
    } else {
      continue;  // core, uncore (inside package), psys (overlaps all), unknown
    }
    found.push_back(std::move(f));
  }
  for (Found& f : found) {
    if (f.zone.domain != RaplDomain::kDram) continue;
    f.zone.socket = f.n;
    for (const auto& [n, k] : package_of_dir)
      if (n == f.n) f.zone.socket = k;
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    if (a.zone.socket != b.zone.socket) return a.zone.socket < b.zone.socket;
    if (a.zone.domain != b.zone.domain) return a.zone.domain == RaplDomain::kPackage;
    return a.zone.path < b.zone.path;
  });
  if (found.empty()) {
    problem_ = "no RAPL package or dram zone (intel-rapl:N with a `name` file) under " + root_;
    return;
  }

  std::vector<RaplZone> zones;
  std::vector<Open> open;
  for (Found& f : found) {
    const std::string range_path = f.zone.path + "/max_energy_range_uj";
    if (!ParseUint(FirstLine(range_path), &f.zone.max_energy_range_uj) ||
        f.zone.max_energy_range_uj == 0) {
      problem_ = "cannot read " + range_path + " (expected a positive integer)";
      break;
    }
    const std::string energy_path = f.zone.path + "/energy_uj";
    Open o;
    o.fd = ::open(energy_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (o.fd < 0) {
      const int err = errno;
      problem_ = "cannot read " + energy_path + ": " + std::strerror(err);
      if (err == EACCES || err == EPERM) problem_ += "; " + PermissionFix(root_);
      break;
    }
    if (!ReadRaw(o.fd, &o.last_raw)) {
      problem_ = "cannot read " + energy_path + " (expected an integer in microjoules)";
      ::close(o.fd);
      break;
    }
    zones.push_back(std::move(f.zone));
    open.push_back(o);
  }
  if (!problem_.empty()) {  // all or nothing: a partial CPU figure would mislead
    for (Open& o : open) ::close(o.fd);
    return;
  }
  zones_ = std::move(zones);
  open_ = std::move(open);
}

RaplCounters::~RaplCounters() {
  for (Open& o : open_) ::close(o.fd);
}

bool RaplCounters::ReadRaw(int fd, uint64_t* value) const {
  char buffer[32];
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return false;
  const char* end = buffer + n;
  while (end > buffer && (end[-1] == '\n' || end[-1] == ' ')) --end;
  auto r = std::from_chars(buffer, end, *value);
  return r.ec == std::errc() && r.ptr == end && end != buffer;
}

bool RaplCounters::Sample(std::span<uint64_t> totals_uj) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool ok = true;
  for (std::size_t i = 0; i < open_.size(); ++i) {
    Open& o = open_[i];
    uint64_t raw = 0;
    if (ReadRaw(o.fd, &raw)) {
      o.total += RaplDeltaUj(o.last_raw, raw, zones_[i].max_energy_range_uj);
      o.last_raw = raw;
    } else {
      ok = false;
    }
    if (i < totals_uj.size()) totals_uj[i] = o.total;
  }
  return ok;
}

}  // namespace joulepipe::monitor
