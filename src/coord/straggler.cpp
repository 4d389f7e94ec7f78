#include "joulepipe/coord/straggler.hpp"

#include <algorithm>
#include <cmath>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::coord {

void CheckStragglerOptions(const protocol::StragglerOptions& o) {
  using model::Format;
  using model::Require;
  Require(std::isfinite(o.threshold) && o.threshold > 1 && o.threshold <= 100,
          "StragglerOptions::threshold",
          Format("StragglerOptions::threshold must be a slowdown factor above 1 and at most 100 "
                 "(got %g); e.g. 1.05 counts a pipeline 5%% slower than the others as straggling",
                 o.threshold));
  Require(std::isfinite(o.recover_below) && o.recover_below >= 1 && o.recover_below <= 100,
          "StragglerOptions::recover_below",
          Format("StragglerOptions::recover_below must be 1..StragglerOptions::threshold (%g) "
                 "(got %g); e.g. 1.03",
                 o.threshold, o.recover_below));
  model::RequireConsistent(
      o.recover_below <= o.threshold, "StragglerOptions::recover_below",
      Format("StragglerOptions::recover_below must be 1..StragglerOptions::threshold (%g) "
             "(got %g); a pipeline counts as recovered below a slowdown no larger than the one "
             "that counts as slow: e.g. 1.03 with a threshold of 1.05",
             o.threshold, o.recover_below));
  Require(o.window >= 1 && o.window <= 100, "StragglerOptions::window",
          Format("StragglerOptions::window must be 1..100 iterations (got %d); 2 ignores one-off "
                 "slow iterations",
                 o.window));
  Require(std::isfinite(o.min_change) && o.min_change >= 0 && o.min_change <= 10,
          "StragglerOptions::min_change",
          Format("StragglerOptions::min_change must be 0..10 (got %g); e.g. 0.05 re-plans when a "
                 "straggler's slowdown moves by 5%%",
                 o.min_change));
}

StragglerDetector::StragglerDetector(int pipelines, protocol::StragglerOptions options)
    : options_(options) {
  CheckStragglerOptions(options_);
  model::Require(pipelines >= 1, "StragglerDetector::pipelines",
                 model::Format("a job has at least one pipeline (got %d)", pipelines));
  slowdown_.assign(pipelines, 1.0);
  slow_run_.assign(pipelines, 0);
  fast_run_.assign(pipelines, 0);
  recent_.assign(pipelines, {});
}

void StragglerDetector::Seed(const std::vector<double>& slowdowns) {
  model::Require(slowdowns.size() == slowdown_.size(), "StragglerDetector::Seed",
                 model::Format("one slowdown per pipeline (%zu); got %zu", slowdown_.size(),
                               slowdowns.size()));
  for (std::size_t p = 0; p < slowdowns.size(); ++p) {
    slowdown_[p] = std::isfinite(slowdowns[p]) && slowdowns[p] > 1 ? slowdowns[p] : 1.0;
  }
}

bool StragglerDetector::any() const {
  return std::any_of(slowdown_.begin(), slowdown_.end(), [](double s) { return s > 1; });
}

bool StragglerDetector::Observe(const std::vector<double>& measured_s,
                                const std::vector<double>& predicted_s) {
  const std::size_t d = slowdown_.size();
  model::Require(measured_s.size() == d && predicted_s.size() == d, "StragglerDetector::Observe",
                 model::Format("one measured and one predicted time per pipeline (%zu); got %zu "
                               "and %zu",
                               d, measured_s.size(), predicted_s.size()));
  // Ratios of the pipelines measured this iteration, and their lower median.
  std::vector<double> ratio(d, 0.0);
  std::vector<double> valid;
  valid.reserve(d);
  for (std::size_t p = 0; p < d; ++p) {
    const double m = measured_s[p], q = predicted_s[p];
    if (std::isfinite(m) && m > 0 && std::isfinite(q) && q > 0) {
      ratio[p] = m / q;
      valid.push_back(ratio[p]);
    }
  }
  if (valid.empty()) return false;
  const std::size_t mid = (valid.size() - 1) / 2;
  std::nth_element(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(mid), valid.end());
  const double reference = valid[mid];

  bool changed = false;
  const std::size_t window = static_cast<std::size_t>(options_.window);
  for (std::size_t p = 0; p < d; ++p) {
    if (ratio[p] <= 0) continue;  // not measured: its runs stand still
    const double rel = std::max(1.0, ratio[p] / reference);
    std::vector<double>& recent = recent_[p];
    recent.push_back(rel);
    if (recent.size() > window) recent.erase(recent.begin());
    if (rel >= options_.threshold) {
      ++slow_run_[p];
    } else {
      slow_run_[p] = 0;
    }
    if (rel < options_.recover_below) {
      ++fast_run_[p];
    } else {
      fast_run_[p] = 0;
    }
    const bool straggling = slowdown_[p] > 1;
    if (!straggling && slow_run_[p] >= options_.window) {
      slowdown_[p] = *std::min_element(recent.begin(), recent.end());
      changed = true;
    } else if (straggling && fast_run_[p] >= options_.window) {
      slowdown_[p] = 1;
      changed = true;
    } else if (straggling && slow_run_[p] >= options_.window) {
      const double estimate = *std::min_element(recent.begin(), recent.end());
      if (std::abs(estimate - slowdown_[p]) > options_.min_change * slowdown_[p]) {
        slowdown_[p] = estimate;
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace joulepipe::coord
