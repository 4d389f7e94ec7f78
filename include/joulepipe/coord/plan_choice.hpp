// The straggler rule (Perseus, SOSP'24): given each data-parallel pipeline's
// slowdown, which frontier plan each pipeline runs.
//
// Every pipeline of a synchronous data-parallel job waits at the gradient
// all-reduce for the slowest one. With slowdowns s_p (1 = on time) and the
// intrinsic plan's time T (least energy at the all-max-clock time), the job
// takes T' = max_p s_p * T. A pipeline with the largest s_p keeps the
// intrinsic plan; every other one runs the least-energy candidate whose time
// stretched by its own slowdown still fits: time * s_p <= T' (and never a
// candidate that costs more than the intrinsic one). Nothing is slower than
// it would have been; the energy the others burned waiting is saved.
//
// CandidateIndex is built once per frontier; each choice is a binary search
// per pipeline. No I/O, no clocks: deterministic.
#pragma once

#include <vector>

namespace joulepipe::coord {

// Times compare with this relative tolerance (a plan planned exactly for T'
// must not be refused for round-off).
inline constexpr double kTimeTolerance = 1e-12;

struct Candidate {
  double time_s = 0;    // predicted iteration time of one noiseless pipeline, > 0
  double energy_j = 0;  // predicted energy of it (one GPU per stage)
};

struct PlanChoice {
  std::vector<int> candidate_of_pipeline;  // index into the candidates
  double target_s = 0;                     // T'
};

class CandidateIndex {
 public:
  // `intrinsic` indexes `candidates`: what every pipeline runs when none
  // straggles. Throws model::InputError (field "Candidate::time_s") on an
  // empty list, a bad index or a time that is not finite and > 0.
  CandidateIndex(std::vector<Candidate> candidates, int intrinsic);

  // Least-energy candidate with time_s <= limit_s, or -1 when none fits.
  int BestWithin(double limit_s) const;

  // The rule above for slowdowns[p] >= 1 (finite). An empty vector is a job
  // of no pipelines (an empty choice, target T).
  PlanChoice Choose(const std::vector<double>& slowdowns) const;

  // Candidates by ascending time that each use strictly less energy than
  // every faster one (the Pareto chain; the indices BestWithin can return).
  const std::vector<int>& chain() const { return chain_; }
  const std::vector<Candidate>& candidates() const { return candidates_; }

 private:
  std::vector<Candidate> candidates_;
  int intrinsic_ = 0;
  // Candidate times ascending, and the least-energy candidate among the
  // first k+1 of them: BestWithin is one binary search.
  std::vector<double> sorted_time_;
  std::vector<int> best_upto_;
  std::vector<int> chain_;
};

}  // namespace joulepipe::coord
