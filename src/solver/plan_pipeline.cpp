#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/solver/wait_plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <utility>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/schedule/profile_fit.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/solver/cost_hull.hpp"

namespace joulepipe::solver {

namespace {

using model::InputError;

using model::Format;

// Throws InputError(field, message) unless 1 <= value <= most.
void RequireCount(const char* field, int value, int most, const char* what) {
  if (value >= 1 && value <= most) return;
  throw InputError(field, Format("%s must be 1..%d (got %d): %s", field, most, value, what));
}

// ---- Plausible rows (CheckProfileRows) -------------------------------------------

// How `row` disagrees with `reference` (two clocks of one instruction), or
// "" when it does not. Rows of one (stage, kind) have distinct clocks.
std::string Disagreement(const model::ClockPoint& row, const model::ClockPoint& reference) {
  const double m = kRowMargin;
  const model::ClockPoint& high = row.mhz > reference.mhz ? row : reference;
  const model::ClockPoint& low = row.mhz > reference.mhz ? reference : row;
  const double clock_ratio = static_cast<double>(high.mhz) / low.mhz;
  const double time_ratio = row.time_s / reference.time_s;
  const bool row_is_low = &low == &row;
  if (low.time_s > high.time_s * clock_ratio * m) {
    if (row_is_low) {
      return Format(
          "that is %.3g times as long, but lowering the clock from %d to %d MHz makes an "
          "instruction at most %.3g times as slow (%.3g with a %gx allowance for "
          "noise): only its compute slows with the clock",
          time_ratio, high.mhz, low.mhz, clock_ratio, clock_ratio * m, m);
    }
    return Format(
        "that is only 1/%.3g of the time, but raising the clock from %d to %d MHz "
        "makes an instruction at most %.3g times as fast (%.3g with a %gx allowance "
        "for noise)",
        1 / time_ratio, low.mhz, high.mhz, clock_ratio, clock_ratio * m, m);
  }
  if (low.time_s * m < high.time_s) {
    if (row_is_low) {
      return Format(
          "that is only 1/%.3g of the time, but a lower clock does not make an "
          "instruction faster (beyond a %gx allowance for noise)",
          1 / time_ratio, m);
    }
    return Format(
        "that is %.3g times as long, but a higher clock does not make an instruction "
        "slower (beyond a %gx allowance for noise)",
        time_ratio, m);
  }
  const double power = row.energy_j / row.time_s;
  const double reference_power = reference.energy_j / reference.time_s;
  if (power > reference_power * kMaxPowerRatio || power * kMaxPowerRatio < reference_power) {
    return Format(
        "that is a mean power of %.4g W against %.4g W, but the clocks of one "
        "instruction differ in power by at most %gx",
        power, reference_power, kMaxPowerRatio);
  }
  return "";
}

std::string LineText(const model::ClockPoint& point) {
  return point.line > 0 ? Format(" (line %d)", point.line) : std::string();
}

// The rows to try as the reference of a (stage, kind): the highest clock and
// up to 15 more spread over the list (all of them for short lists), so the
// check stays linear in the number of rows.
constexpr std::size_t kReferenceCandidates = 16;

// The rows of one (stage, kind) that disagree with its reference row (the
// one that agrees with the most others), each with why.
struct OddRow {
  std::size_t index = 0;
  std::string why;
};
std::size_t ReferenceRow(const std::vector<model::ClockPoint>& points) {
  const std::size_t n = points.size();
  const std::size_t candidates = std::min(n, kReferenceCandidates);
  std::size_t reference = 0, best_agreements = 0;
  for (std::size_t c = 0; c < candidates; ++c) {
    const std::size_t index = candidates > 1 ? c * (n - 1) / (candidates - 1) : 0;
    std::size_t agreements = 0;
    for (const model::ClockPoint& other : points) {
      if (&other == &points[index] || Disagreement(other, points[index]).empty()) ++agreements;
    }
    // Ties keep the higher clock (points are highest first).
    if (agreements > best_agreements) {
      best_agreements = agreements;
      reference = index;
    }
  }
  return reference;
}

std::vector<OddRow> OddRows(const std::vector<model::ClockPoint>& points, std::size_t reference) {
  std::vector<OddRow> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i == reference) continue;
    std::string why = Disagreement(points[i], points[reference]);
    if (!why.empty()) out.push_back({i, std::move(why)});
  }
  return out;
}

void CheckRows(const std::vector<model::ClockPoint>& points, int stage, model::Kind kind,
               const std::string& profile_name) {
  if (points.size() < 2) return;
  const std::size_t reference = ReferenceRow(points);
  const std::vector<OddRow> odd = OddRows(points, reference);
  if (odd.empty()) return;
  const model::ClockPoint& ref = points[reference];
  const model::ClockPoint& row = points[odd.front().index];
  const std::string where = row.line > 0 ? Format(" line %d", row.line) : std::string();
  throw InputError(Format("%s%s: stage %d %s at %d MHz takes %.6g s and %.6g J, against %.6g s "
                          "and %.6g J at %d MHz%s: ",
                          profile_name.c_str(), where.c_str(), stage,
                          std::string(model::KindName(kind)).c_str(), row.mhz, row.time_s,
                          row.energy_j, ref.time_s, ref.energy_j, ref.mhz, LineText(ref).c_str()) +
                   odd.front().why +
                   ". The row is not a plausible measurement: re-measure this clock or "
                   "delete the row");
}

// ---- The grid's real span ------------------------------------------------------

// The clocks of the fastest and of the least-energy option of every
// instruction among the options that are not dominated (slower and not
// cheaper in effective energy than another clock of the same (stage, kind)):
// exactly the options the solver plans with (cost_hull.hpp), so the grid
// spans the two plans' times. `widest` says which (stage, kind) spans the
// most, for the message when the grid is too fine.
struct UsefulClocks {
  std::vector<std::uint16_t> fastest, cheapest;
  std::string widest;
};

UsefulClocks UsefulClocksOf(const schedule::Schedule& schedule, const model::Profile& profile,
                            double p_block_w) {
  const int profile_stages = profile.num_stages();
  std::map<std::pair<int, model::Kind>, std::pair<Option, Option>> ends;
  double widest_ratio = 0;
  UsefulClocks out;
  out.fastest.resize(schedule.num_nodes());
  out.cheapest.resize(schedule.num_nodes());
  for (int node = 0; node < schedule.num_nodes(); ++node) {
    const model::Instruction& ins = schedule.nodes[node];
    const int stage = schedule::ProfileStage(schedule.spec, profile_stages, ins);
    auto it = ends.find({stage, ins.kind});
    if (it == ends.end()) {
      const CostHull hull = BuildCostHull(profile.Points(stage, ins.kind), p_block_w);
      const Option& fast = hull.pareto.front();
      const Option& cheap = hull.pareto.back();
      it = ends.emplace(std::pair{stage, ins.kind}, std::pair{fast, cheap}).first;
      const double ratio = cheap.time_s / fast.time_s;
      if (ratio > widest_ratio) {
        widest_ratio = ratio;
        out.widest = Format(
            "the widest instruction is stage %d %s: %.6g s at %d MHz, its fastest clock, to "
            "%.6g s at %d MHz, its least-energy one (%.3gx)",
            stage, std::string(model::KindName(ins.kind)).c_str(), fast.time_s, fast.mhz,
            cheap.time_s, cheap.mhz, ratio);
      }
    }
    out.fastest[node] = static_cast<std::uint16_t>(it->second.first.mhz);
    out.cheapest[node] = static_cast<std::uint16_t>(it->second.second.mhz);
  }
  return out;
}

}  // namespace

void CheckPlanRequest(const PlanRequest& request) {
  schedule::CheckStagesAndMicrobatches(request.spec);
  RequireCount("Spec::stages", request.spec.stages, kMaxStages,
               "the pipeline's stages (GPUs per pipeline)");
  RequireCount("Spec::microbatches", request.spec.microbatches, kMaxMicrobatches,
               "the microbatches per iteration");
  RequireCount("Spec::chunks", request.spec.chunks, kMaxChunks,
               "model chunks per stage (1 except for the interleaved schedule)");
  if (request.p_block_w) model::CheckPBlock(*request.p_block_w, "PlanRequest::p_block_w");
  if (!std::isfinite(request.slowdown) || request.slowdown < 0 || request.slowdown > kMaxSlowdown) {
    throw InputError("PlanRequest::slowdown",
                     Format("PlanRequest::slowdown must be a fraction 0..%g (got %g); e.g. "
                            "0.05 allows iterations 5%% longer than at full clock",
                            kMaxSlowdown, request.slowdown));
  }
  CheckObjective(request.objective);
  if (!std::isfinite(request.objective_scale) || request.objective_scale <= 0) {
    throw InputError("PlanRequest::objective_scale",
                     Format("PlanRequest::objective_scale must be > 0 (got %g): how many copies "
                            "of the pipeline the objective's budgets cover",
                            request.objective_scale));
  }
  if (!std::isfinite(request.resolution_s) || request.resolution_s <= 0 ||
      request.resolution_s > kMaxResolutionS) {
    throw InputError("PlanRequest::resolution_s",
                     Format("PlanRequest::resolution_s must be a time > 0 and at most an hour, "
                            "%.0f ms (got %g ms); e.g. 1 ms",
                            kMaxResolutionS * 1e3, request.resolution_s * 1e3));
  }
  for (std::size_t i = 0; i < request.extra_deadline_factors.size(); ++i) {
    const double factor = request.extra_deadline_factors[i];
    if (std::isfinite(factor) && factor > 0 && factor <= kMaxDeadlineFactor) continue;
    throw InputError("PlanRequest::extra_deadline_factors",
                     Format("PlanRequest::extra_deadline_factors[%zu] must be a multiple of the "
                            "all-max-clock time > 0 and at most %g (got %g); e.g. 1.2 for a "
                            "straggler that takes 1.2 times as long",
                            i, kMaxDeadlineFactor, factor));
  }
}

void CheckProfileRows(const model::Profile& profile, const std::string& profile_name) {
  for (int s : profile.stages()) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      CheckRows(profile.Points(s, kind), s, kind, profile_name);
    }
  }
}

std::vector<ImplausibleRow> ImplausibleRows(const model::Profile& profile) {
  std::vector<ImplausibleRow> out;
  for (int s : profile.stages()) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const std::vector<model::ClockPoint>& points = profile.Points(s, kind);
      if (points.size() < 2) continue;
      const std::size_t reference = ReferenceRow(points);
      const model::ClockPoint& ref = points[reference];
      for (OddRow& odd : OddRows(points, reference)) {
        const model::ClockPoint& row = points[odd.index];
        out.push_back({s, kind, odd.index, row.mhz,
                       Format("stage %d %s at %d MHz was measured at %.6g s and %.6g J, against "
                              "%.6g s and %.6g J at %d MHz: %s",
                              s, std::string(model::KindName(kind)).c_str(), row.mhz, row.time_s,
                              row.energy_j, ref.time_s, ref.energy_j, ref.mhz, odd.why.c_str())});
      }
    }
  }
  return out;
}

model::Profile LeaveOutImplausibleRows(const model::Profile& profile,
                                       std::vector<std::string>* notes) {
  model::Profile out = profile;
  const std::vector<ImplausibleRow> odd = ImplausibleRows(profile);
  // Highest index of each (stage, kind) first, so the indices left to
  // remove stay valid (ImplausibleRows lists them ascending per group).
  for (auto it = odd.rbegin(); it != odd.rend(); ++it) {
    out.RemovePoint(it->stage, it->kind, it->index);
  }
  if (notes != nullptr) {
    for (const ImplausibleRow& row : odd) {
      notes->push_back(row.why +
                       "; that clock is left out of the plan (a noisy measurement or a "
                       "throttled GPU)");
    }
  }
  return out;
}

model::Profile NoRowFasterThanTheTopClock(const model::Profile& profile,
                                          std::vector<std::string>* notes) {
  model::Profile out = profile;
  if (profile.has_knobs() || profile.metadata.source != "measured") return out;
  for (int s : profile.stages()) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const std::vector<model::ClockPoint>& points = profile.Points(s, kind);
      if (points.size() < 2) continue;
      const model::ClockPoint& top = points.front();  // highest clock first
      std::string clocks;
      int faster = 0;
      double most = 0;  // the largest relative difference
      for (std::size_t i = 1; i < points.size(); ++i) {
        if (points[i].time_s >= top.time_s) continue;
        clocks += Format("%s%d", faster++ ? ", " : "", points[i].mhz);
        most = std::max(most, 1 - points[i].time_s / top.time_s);
        out.SetTime(s, kind, i, top.time_s);
      }
      if (faster > 0 && notes != nullptr) {
        notes->push_back(Format(
            "stage %d %s: %d lower clock%s (%s MHz) measured faster than its highest clock, "
            "%d MHz (by up to %.2f %%): planned as taking as long as at %d MHz, %.6g s, "
            "since a lower clock does not make an instruction faster (noise or a throttled GPU)",
            s, std::string(model::KindName(kind)).c_str(), faster, faster > 1 ? "s" : "",
            clocks.c_str(), top.mhz, 100 * most, top.mhz, top.time_s));
      }
    }
  }
  return out;
}

void CheckGridSize(double fastest_s, double slowest_s, double resolution_s,
                   const std::string& why) {
  const double deadlines = std::max(0.0, slowest_s - fastest_s) / resolution_s;
  if (deadlines <= kMaxGridDeadlines) return;
  const double finest_ms = (slowest_s - fastest_s) / kMaxGridDeadlines * 1e3;
  throw InputError(
      "PlanRequest::resolution_s",
      Format("the useful plans take from %.6g s (the fastest clocks) to %.6g s (the "
             "least-energy ones); PlanRequest::resolution_s of %g ms would plan about %.0f "
             "deadlines between them (at most %.0f); use %.3g ms or more",
             fastest_s, slowest_s, resolution_s * 1e3, deadlines, kMaxGridDeadlines,
             finest_ms * 1.001) +
          (why.empty() ? "" : "; " + why));
}

PipelinePlan PreparePipelinePlan(const model::Profile& profile, const PlanRequest& request) {
  CheckPlanRequest(request);
  PipelinePlan plan;
  plan.request = request;
  const schedule::PBlockChoice p_block = schedule::ResolvePBlock(
      request.p_block_w, profile, "PlanRequest::p_block_w", request.profile_name);
  plan.p_block_w = p_block.watts;
  plan.p_block_source = p_block.source;
  plan.notes = p_block.notes;
  plan.schedule = schedule::Build(request.spec);
  const schedule::Schedule& schedule = plan.schedule;
  schedule::CheckProfileFits(profile, request.spec, request.profile_name);
  CheckProfileRows(profile, request.profile_name);
  // The deadline must be known before solving so the solver plans for it.
  plan.baseline = EvaluateClocks(schedule, profile, plan.p_block_w,
                                 UniformClocks(schedule, profile, /*highest=*/true));
  plan.deadline_s = (1 + request.slowdown) * plan.baseline.time_s;
  // The grid spans the plans the solver can make from undominated options
  // only: a dominated slow clock never widens it.
  const UsefulClocks useful = UsefulClocksOf(schedule, profile, plan.p_block_w);
  plan.slowest_s = EvaluateClocks(schedule, profile, plan.p_block_w, useful.cheapest).time_s;
  const double fastest_s =
      std::min(plan.baseline.time_s,
               EvaluateClocks(schedule, profile, plan.p_block_w, useful.fastest).time_s);
  CheckGridSize(fastest_s, plan.slowest_s, request.resolution_s, useful.widest);
  return plan;
}

void SolvePipelinePlan(const model::Profile& profile, PipelinePlan* plan) {
  const PlanRequest& request = plan->request;
  Options options;
  options.p_block_w = plan->p_block_w;
  options.resolution_s = request.resolution_s;
  options.extra_deadlines_s = {plan->deadline_s};
  for (double factor : request.extra_deadline_factors) {
    options.extra_deadlines_s.push_back(factor * plan->baseline.time_s);
  }
  options.progress = request.progress;
  options.cancel = request.cancel;
  const auto started = std::chrono::steady_clock::now();
  plan->frontier = SolveFrontier(plan->schedule, profile, options);
  plan->solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // The all-max-clock plan meets the deadline, and the frontier keeps it or a
  // point that dominates it, so within the deadline there is always a choice.
  Objective objective = request.objective;
  if (objective.outside_wait_w == 0) objective.outside_wait_w = plan->p_block_w;
  plan->chosen = ChooseOperatingPoint(plan->frontier, objective, plan->deadline_s,
                                      request.spec.stages, request.objective_scale);
  plan->bound_energy_j = plan->frontier.BoundAt(plan->baseline.time_s);
  if (request.waits) {
    const model::WaitModel& w = *request.waits;
    if (!w.gpu.empty() && !profile.metadata.gpu.empty() && w.gpu != profile.metadata.gpu) {
      plan->notes.push_back("the wait model " + w.source + " was calibrated on " + w.gpu +
                            " but the profile is of " + profile.metadata.gpu +
                            "; calibrate on the profile's GPU for figures that hold");
    }
    plan->waits = PriceWaits(profile, *plan, w);
    plan->chosen = plan->waits->chosen;
  }
}

PipelinePlan PlanPipeline(const model::Profile& profile, const PlanRequest& request) {
  PipelinePlan plan = PreparePipelinePlan(profile, request);
  SolvePipelinePlan(profile, &plan);
  return plan;
}

}  // namespace joulepipe::solver
