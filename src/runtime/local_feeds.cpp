// The sources of plans inside the job (coordinated_plan_state.hpp): plans
// the job's own ranks offer, and a plan file. MakePlanFeed picks a source.
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "coordinated_plan_state.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/protocol/json.hpp"

namespace joulepipe::runtime {

namespace {

// Embedded coordination: rank 0's coord::Job plans, and the job's process
// group carries each rank its plan as protocol::RankPlanToJson text.
// Nothing is registered, fetched or reported; Start() only applies a plan
// already offered.
class InProcessFeed final : public PlanFeed {
 public:
  explicit InProcessFeed(CoordinatedPlan::State& state) : s_(state) {}

  bool Start() override { return s_.ApplyPending(); }

  bool Offer(const std::string& rank_plan_json) noexcept override {
    try {
      protocol::RankPlan plan = protocol::RankPlanFromJson(
          model::ParseJsonBounded(rank_plan_json, "the offered plan"), s_.options.rank, 0);
      if (!s_.DeliverNewer(std::move(plan))) return false;
      Bump(s_.plans_fetched);
      return true;
    } catch (const std::exception& e) {
      s_.Log(std::string("a plan offered to rank ") + std::to_string(s_.options.rank) +
             " was not taken: " + e.what() + "; " + s_.Keeps());
      return false;
    }
  }

  std::string AppliedLine(const protocol::RankPlan& plan,
                          const std::vector<model::PlannedInstruction>& in, bool reordered,
                          const char* /*how*/) const override {
    return s_.LocalAppliedLine(Name(plan), plan, in, reordered, "; " + plan.reason);
  }

 private:
  CoordinatedPlan::State& s_;
};

// A plan `joulepipe plan` wrote: Start() applies stage options.stage (its
// head wait, or its power limit for a power-limit plan, and a grid plan's
// shape and offset with it), and nothing ever changes it.
class PlanFileFeed final : public PlanFeed {
 public:
  explicit PlanFileFeed(CoordinatedPlan::State& state) : s_(state) {
    model::Require(s_.options.plan != nullptr, "CoordinatedPlanOptions::plan",
                   "CoordinatedPlanOptions::plan must be set for PlanSource::kPlan");
  }

  bool Start() override {
    try {
      ApplyStage();
    } catch (const std::exception& e) {
      s_.Refuse(std::string("the plan ") + s_.options.plan_name +
                " could not be applied: " + e.what());
    }
    return s_.running_version.load(std::memory_order_relaxed) > 0;
  }

  std::string Name(const protocol::RankPlan& /*plan*/) const override {
    return "the plan " + s_.options.plan_name;
  }

  std::string AppliedLine(const protocol::RankPlan& plan,
                          const std::vector<model::PlannedInstruction>& in, bool reordered,
                          const char* /*how*/) const override {
    return s_.LocalAppliedLine("plan " + s_.options.plan_name, plan, in, reordered, "");
  }

 private:
  // Stage options.stage of options.plan, or why not.
  void ApplyStage() {
    const CoordinatedPlanOptions& o = s_.options;
    const model::Plan& plan = *o.plan;
    const std::string& name = o.plan_name;
    if (o.stages > 0 && plan.num_stages != o.stages) {
      s_.Refuse("the plan " + name + " is for " + std::to_string(plan.num_stages) +
                " pipeline stages, this job has " + std::to_string(o.stages) +
                "; plan the job's own profile");
      return;
    }
    if (o.stage < 0 || o.stage >= static_cast<int>(plan.stages.size())) {
      s_.Refuse("the plan " + name + " has no stage " + std::to_string(o.stage) + " (it has " +
                std::to_string(plan.stages.size()) + ")");
      return;
    }
    protocol::RankPlan r;
    r.rank = o.rank;
    r.stage = o.stage;
    r.version = 1;
    r.reason = "plan file " + name;
    r.predicted = plan.predicted;
    r.instructions = plan.stages[o.stage];
    PlanExtras extras;
    if (o.stage < static_cast<int>(plan.head_waits.size())) {
      extras.head_wait = plan.head_waits[o.stage];
    }
    if (!plan.power_limits_w.empty()) extras.power_limit_w = plan.power_limits_w.at(o.stage);
    extras.shape = model::StageShapeOf(plan, o.stage);
    extras.pipeline_offset_s = plan.grid ? plan.grid->pipeline_offset_s : 0;
    s_.Apply(std::move(r), "running", std::move(extras));
  }

  CoordinatedPlan::State& s_;
};

}  // namespace

std::unique_ptr<PlanFeed> MakePlanFeed(CoordinatedPlan::State& state) {
  switch (state.options.source) {
    case PlanSource::kCoordinator:
      return MakeCoordinatorFeed(state);
    case PlanSource::kInProcess:
      return std::make_unique<InProcessFeed>(state);
    case PlanSource::kPlan:
      return std::make_unique<PlanFileFeed>(state);
  }
  throw model::InputError("CoordinatedPlanOptions::source",
                          "CoordinatedPlanOptions::source "
                          "must be kCoordinator, kInProcess or kPlan");
}

}  // namespace joulepipe::runtime
