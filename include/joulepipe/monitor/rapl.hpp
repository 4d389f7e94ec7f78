// CPU package and DRAM energy from the Linux powercap RAPL interface.
//
// Layout read (all under a root, /sys/class/powercap by default):
//   intel-rapl:N/      a package zone: files `name` ("package-K"),
//                      `energy_uj`, `max_energy_range_uj`
//   intel-rapl:N:M/    its subzones; `name` is "dram", "core", "uncore"
// Only package and dram zones are counted: core and uncore are parts of the
// package figure, psys (laptops) overlaps everything and intel-rapl-mmio
// duplicates the package zone. AMD Zen CPUs appear under the same names on
// recent kernels (package zones only, no dram); the separate `amd_energy`
// hwmon driver is not read.
//
// energy_uj is a microjoule counter that wraps to 0 after
// max_energy_range_uj. A delta that goes backwards is taken as one wrap
// (delta += max_energy_range_uj + 1); more than one wrap between two reads
// cannot be detected, so RaplCounters must be sampled more often than the
// fastest zone wraps (a typical 262 kJ range wraps after ~15 min at 300 W,
// smaller ranges sooner; Monitor's sampler thread reads every period).
//
// Since Linux 5.10 (CVE-2020-8694) energy_uj is readable by root only; an
// unreadable tree is reported through RaplProblem, never by a crash.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace joulepipe::monitor {

inline constexpr char kDefaultRaplRoot[] = "/sys/class/powercap";

enum class RaplDomain { kPackage, kDram };

const char* RaplDomainName(RaplDomain domain);  // "package", "dram"

struct RaplZone {
  std::string path;  // the zone directory, e.g. <root>/intel-rapl:0:0
  std::string name;  // contents of its `name` file, e.g. "package-0", "dram"
  RaplDomain domain = RaplDomain::kPackage;
  int socket = 0;  // K of the owning zone's "package-K"
  uint64_t max_energy_range_uj = 0;
};

// Energy in microjoules between two readings `before` and `after` of a
// counter whose values lie in [0, max_energy_range_uj]. Assumes at most one
// wrap: after < before means the counter passed max_energy_range_uj once.
uint64_t RaplDeltaUj(uint64_t before, uint64_t after, uint64_t max_energy_range_uj);

// The package and dram zones under a powercap root, each opened for reading,
// with a 64-bit running total per zone that hides the wrap-around.
// Thread-safe: Sample() may be called from any thread (a mutex guards the
// running totals; it is held only for the reads).
class RaplCounters {
 public:
  // Finds and opens the zones under `root`. Never throws for a missing or
  // unreadable tree: then zones() is empty and problem() says what is wrong
  // and how to fix it (e.g. the permission note above). Zones are ordered by
  // socket, package before dram.
  explicit RaplCounters(const std::string& root = kDefaultRaplRoot);
  ~RaplCounters();
  RaplCounters(const RaplCounters&) = delete;
  RaplCounters& operator=(const RaplCounters&) = delete;

  const std::string& root() const { return root_; }
  const std::vector<RaplZone>& zones() const { return zones_; }
  bool available() const { return !zones_.empty(); }
  // Empty when available(); otherwise one sentence naming the path at fault
  // and the fix.
  const std::string& problem() const { return problem_; }

  // Reads every zone and writes its running total (microjoules since this
  // object was made, wraps accounted) to totals_uj[i] for zone i. Requires
  // totals_uj.size() >= zones().size(). No allocation. A read that fails
  // after construction leaves that zone's total where it was and returns
  // false.
  bool Sample(std::span<uint64_t> totals_uj);

 private:
  struct Open {
    int fd = -1;
    uint64_t last_raw = 0;
    uint64_t total = 0;
  };
  bool ReadRaw(int fd, uint64_t* value) const;

  std::string root_;
  std::string problem_;
  std::vector<RaplZone> zones_;
  std::vector<Open> open_;  // parallel to zones_
  std::mutex mutex_;        // guards open_[i].last_raw and .total
};

}  // namespace joulepipe::monitor
