#include "joulepipe/coord/plan_choice.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::coord {

CandidateIndex::CandidateIndex(std::vector<Candidate> candidates, int intrinsic)
    : candidates_(std::move(candidates)), intrinsic_(intrinsic) {
  const int count = static_cast<int>(candidates_.size());
  if (count == 0) {
    throw model::InputError("Candidate::time_s",
                            "there are no candidate plans; plan the pipeline's frontier first");
  }
  if (intrinsic < 0 || intrinsic >= count) {
    throw model::InputError("Candidate::time_s",
                            model::Format("the intrinsic plan %d is not one of the %d candidates",
                                          intrinsic, count));
  }
  for (int c = 0; c < count; ++c) {
    const Candidate& k = candidates_[c];
    if (!(std::isfinite(k.time_s) && k.time_s > 0) || !std::isfinite(k.energy_j)) {
      throw model::InputError(
          "Candidate::time_s",
          model::Format("candidate %d has time %g s and energy %g J; each needs a finite time "
                        "> 0 and a finite energy",
                        c, k.time_s, k.energy_j));
    }
  }
  // Ascending time (stable: ties keep their order), the least energy so far.
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return candidates_[a].time_s < candidates_[b].time_s;
  });
  for (int k = 0; k < count; ++k) {
    const int c = order[k];
    sorted_time_.push_back(candidates_[c].time_s);
    const bool better =
        k == 0 || candidates_[c].energy_j < candidates_[best_upto_[k - 1]].energy_j;
    best_upto_.push_back(better ? c : best_upto_[k - 1]);
    if (better) chain_.push_back(c);
  }
}

int CandidateIndex::BestWithin(double limit_s) const {
  const auto end = std::upper_bound(sorted_time_.begin(), sorted_time_.end(), limit_s);
  if (end == sorted_time_.begin()) return -1;
  return best_upto_[static_cast<std::size_t>(end - sorted_time_.begin()) - 1];
}

PlanChoice CandidateIndex::Choose(const std::vector<double>& slowdowns) const {
  PlanChoice choice;
  const Candidate& intrinsic = candidates_[intrinsic_];
  choice.candidate_of_pipeline.assign(slowdowns.size(), intrinsic_);
  if (slowdowns.empty()) {
    choice.target_s = intrinsic.time_s;
    return choice;
  }
  const double worst = *std::max_element(slowdowns.begin(), slowdowns.end());
  choice.target_s = worst * intrinsic.time_s;
  for (std::size_t p = 0; p < slowdowns.size(); ++p) {
    if (slowdowns[p] >= worst) continue;  // a slowest pipeline keeps the intrinsic plan
    const int best = BestWithin(choice.target_s / slowdowns[p] * (1 + kTimeTolerance));
    if (best >= 0 && candidates_[best].energy_j <= intrinsic.energy_j) {
      choice.candidate_of_pipeline[p] = best;
    }
  }
  return choice;
}

}  // namespace joulepipe::coord
