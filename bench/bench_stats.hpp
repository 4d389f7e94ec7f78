// Order statistics for the benchmarks' latency figures.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace joulepipe::bench {

// The q-quantile (0 = min, 0.5 = median, 1 = max) by nearest rank. `v` must
// not be empty; it is taken by value and sorted.
inline double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace joulepipe::bench
