#include "flag_names.hpp"

#include <string_view>
#include <utility>

#include "joulepipe/model/field_names.hpp"

namespace joulepipe::cli {

namespace {

// Library field -> joulepipe flag (model::RenameFields replaces whole tokens
// only). Where a flag's unit differs from the field's
// (resolution_s vs --resolution-ms), library messages quote values with
// their unit, so the message stays true under either name.
constexpr std::pair<std::string_view, std::string_view> kFlagNames[] = {
    // schedule::Spec
    {"Spec::kind", "--schedule"},
    {"Spec::stages", "--stages"},
    {"Spec::microbatches", "--microbatches"},
    {"Spec::chunks", "--chunks"},
    // task calls (solver::PlanRequest, sim::SimulateRequest, ...)
    {"PlanRequest::p_block_w", "--p-block"},
    {"PlanRequest::slowdown", "--slowdown"},
    {"SimulateRequest::p_block_w", "--p-block"},
    {"SimulateRequest::slowdown", "--max-slowdown"},
    {"PlanRequest::resolution_s", "--resolution-ms"},
    // model::Objective (plan, simulate)
    {"Objective::energy_budget_j", "--energy-budget"},
    {"Objective::power_budget_w", "--power-budget"},
    {"Objective::host_power_w", "--host-power"},
    // sim::SimulateRequest, sim::JobSpec, sim::Straggler (simulate, demo)
    {"SimulateRequest::detection_lag", "--detection-lag"},
    {"StragglerOptions::window", "--detection-window"},
    {"StragglerOptions::threshold", "--detection-threshold"},
    {"SimulateRequest::resolution_s", "--resolution-ms"},
    {"SimulateRequest::timeline_iterations", "--timeline-iterations"},
    {"JobSpec::p_block_w", "--p-block"},
    {"JobSpec::pipelines", "--pipelines"},
    {"JobSpec::gpus_per_stage", "--tp"},
    {"JobSpec::iterations", "--iterations"},
    {"JobSpec::clock_variability", "--clock-variability"},
    {"JobSpec::stall_probability", "--stall-probability"},
    {"JobSpec::stall_s", "--stall-ms"},
    {"JobSpec::p2p_latency_s", "--p2p-latency-us"},
    {"JobSpec::allreduce_s", "--allreduce-ms"},
    {"JobSpec::seed", "--seed"},
    {"Straggler::slowdown", "--straggler-slowdown"},
    {"Straggler::pipeline", "--straggler-pipeline"},
    {"Straggler::from_iteration", "--straggler-from"},
    {"Straggler::for_iterations", "--straggler-for"},
    {"Straggler::period", "--straggler-period"},
    // tune::TuneRequest (tune)
    {"TuneRequest::gpus", "--gpus"},
    {"TuneRequest::global_batch", "--global-batch"},
    {"TuneRequest::keep", "--keep"},
    {"TuneRequest::current", "today's configuration (--tp, --pp, --microbatch-size, --schedule)"},
    {"TuneRequest::gpus_per_node", "--gpus-per-node"},
    {"TuneRequest::max_chunks", "--max-chunks"},
    {"TuneRequest::max_microbatch_size", "--max-microbatch-size"},
    {"TuneRequest::memory_margin", "--memory-margin"},
    {"TuneRequest::slowdown", "--slowdown"},
    {"TuneRequest::envelope_span", "--envelope-span"},
    {"TuneRequest::grid_points", "--grid-points"},
    {"TuneRequest::max_instructions", "--max-instructions"},
    {"TuneRequest::dp_gbps", "--dp-gbps"},
    {"TuneRequest::p2p_gbps", "--p2p-gbps"},
    // sim::SiteRequest (site)
    {"SiteRequest::tokens", "--tokens"},
    {"SiteRequest::pue", "--pue"},
    {"SiteRequest::host_power_w", "--host-power"},
    {"SiteRequest::price_per_kwh", "--price-per-kwh"},
    {"SiteRequest::currency", "--currency"},
    {"SiteRequest::carbon_g_per_kwh", "--carbon-g-per-kwh"},
    {"SiteRequest::power_budget_w", "--power-budget-mw"},
    {"SiteRequest::straggler_slowdown", "--straggler-slowdown"},
    {"SiteRequest::resolution_s", "--resolution-ms"},
    // schedule::EvaluateRequest (evaluate)
    {"EvaluateRequest::p_block_w", "--p-block"},
    {"EvaluateRequest::waits", "--wait-model"},
    // physics: workload and simulated profiles
    {"Parallelism::tp", "--tp"},
    {"Parallelism::pp", "--pp"},
    {"Parallelism::dp", "--dp"},
    {"Parallelism::layer_split", "--layer-split"},
    {"Placement::gpus_per_node", "--gpus-per-node"},
    {"Placement::node_network_gbps", "--node-network-gbps"},
    {"Placement::rank_order", "--rank-order"},
    // The library's name for the balanced split is the function that makes
    // it; the CLI asks for it with "--layer-split balanced".
    {"BalancedLayerSplit", "--layer-split balanced"},
    {"WorkloadSpec::microbatch_size", "--microbatch-size"},
    {"WorkloadSpec::seq_length", "--seq"},
    {"WorkloadSpec::recompute", "--recompute"},
    {"WorkloadSpec::framework", "--framework"},
    {"WorkloadSpec::precision", "--precision"},
    {"ProfileOptions::power_limit_w", "--power-limit"},
    {"PowerLimitRequest::min_limit_w", "--min-power-limit"},
    {"PowerLimitRequest::max_limit_w", "--max-power-limit"},
    {"ProfileOptions::min_mhz", "--min-mhz"},
    // solver::Options and sim::RunOptions: the planner's and the simulator's
    // own checks, for values that reach them unchecked
    {"Options::p_block_w", "--p-block"},
    {"RunOptions::detection_lag", "--detection-lag"},
    {"RunOptions::timeline_iterations", "--timeline-iterations"},
    // model: output directories and files (the longer name first: whole
    // tokens end at "::")
    {"OutputDirectory::force", "--force"},
    {"OutputDirectory", "--out"},
    // report::PlanReportInputs (report)
    {"PlanReportInputs::profile", "--profile"},
    {"PlanReportInputs::plan", "--plan"},
    {"PlanReportInputs::sim", "--sim"},
    // serve::ServerOptions and serve::ZeusDefaults (serve)
    {"ServerOptions::host", "--host"},
    {"ServerOptions::port", "--port"},
    {"ServerOptions::db_path", "--db"},
    {"ServerOptions::token", "--token-file"},
    {"ServerOptions::evict_after_s", "--evict-after"},
    {"ServerOptions::max_connections", "--max-connections"},
    {"ServerOptions::max_connections_per_client", "--max-connections-per-client"},
    {"ServerOptions::max_jobs", "--max-jobs"},
    {"ServerOptions::max_waiting", "--max-waiting"},
    {"ServerOptions::keep_alive_connections", "--keep-alive-connections"},
    {"ServerOptions::planners", "--planners"},
    {"ServerOptions::plan_time_limit_s", "--plan-time-limit"},
    {"ServerOptions::light_solve_budget_s", "--light-solve-budget"},
    {"SpreadClocks::count", "--points"},
    {"WaitCalibrationOptions::clocks_mhz", "--clocks"},
    {"WaitCalibrationOptions::dwell_s", "--dwell-s"},
    {"WaitCalibrationOptions::settle_s", "--settle-s"},
    {"ZeusDefaults::microbatches", "--microbatches"},
    {"ZeusDefaults::p_block_w", "--p-block"},
};

}  // namespace

std::string WithFlagNames(const std::string& message) {
  return model::RenameFields(message, kFlagNames);
}

}  // namespace joulepipe::cli
