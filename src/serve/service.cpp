// Service: life cycle, the options' checks, dispatch through the router,
// and the transport's calls for parked requests. The routes live in
// routes.cpp (native) and zeus_routes.cpp.
#include "service.hpp"

#include <cmath>
#include <utility>

#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/profile_rows.hpp"

namespace joulepipe::serve {

using model::Format;

namespace {

// The options, checked; the Zeus default profile's CSV and name filled in.
ServerOptions Checked(ServerOptions options) {
  model::Require(options.evict_after_s >= 0 && std::isfinite(options.evict_after_s),
                 "ServerOptions::evict_after_s",
                 Format("ServerOptions::evict_after_s must be >= 0 seconds, 0 for never (got %g)",
                        options.evict_after_s));
  model::Require(options.evict_check_period_s > 0, "ServerOptions::evict_check_period_s",
                 Format("ServerOptions::evict_check_period_s must be > 0 (got %g)",
                        options.evict_check_period_s));
  model::Require(
      options.max_jobs >= 1 && options.max_jobs <= 1'000'000, "ServerOptions::max_jobs",
      Format("ServerOptions::max_jobs must be 1..1000000 jobs (got %d)", options.max_jobs));
  model::Require(
      options.planners >= 1 && options.planners <= 64, "ServerOptions::planners",
      Format("ServerOptions::planners must be 1..64 planning threads (got %d)", options.planners));
  model::Require(std::isfinite(options.light_solve_budget_s) && options.light_solve_budget_s > 0,
                 "ServerOptions::light_solve_budget_s",
                 Format("ServerOptions::light_solve_budget_s must be > 0 seconds (got %g)",
                        options.light_solve_budget_s));
  model::Require(std::isfinite(options.plan_time_limit_s) && options.plan_time_limit_s > 0 &&
                     options.plan_time_limit_s <= 7 * 86400,
                 "ServerOptions::plan_time_limit_s",
                 Format("ServerOptions::plan_time_limit_s must be > 0 seconds and at most a week "
                        "(got %g)",
                        options.plan_time_limit_s));
  model::Require(options.max_waiting >= 1 && options.max_waiting <= options.max_connections,
                 "ServerOptions::max_waiting",
                 Format("ServerOptions::max_waiting must be 1..max_connections (%d) plan waits "
                        "held at once (got %d)",
                        options.max_connections, options.max_waiting));
  model::Require(options.keep_alive_connections >= 0 &&
                     options.keep_alive_connections <= options.max_connections,
                 "ServerOptions::keep_alive_connections",
                 Format("ServerOptions::keep_alive_connections must be 0..max_connections (%d) "
                        "(got %d)",
                        options.max_connections, options.keep_alive_connections));
  // A token is what stands between the network and every job: one short
  // enough to guess is refused at start, not found out later.
  model::Require(options.token.empty() || options.token.size() >= kMinTokenBytes,
                 "ServerOptions::token",
                 Format("ServerOptions::token must be at least %zu bytes (got %zu); make one "
                        "with: head -c 24 /dev/urandom | base64 > token; chmod 600 token",
                        kMinTokenBytes, options.token.size()));
  ZeusDefaults& z = options.zeus;
  model::Require(
      z.microbatches >= 0, "ZeusDefaults::microbatches",
      Format("ZeusDefaults::microbatches must be >= 1, or 0 for none (got %d)", z.microbatches));
  if (z.profile_name.empty()) z.profile_name = "the default profile";
  if (z.profile) {
    model::Require(z.microbatches > 0, "ZeusDefaults::microbatches",
                   "a default profile for Zeus jobs needs their schedule too: set "
                   "ZeusDefaults::microbatches");
    model::Require(z.p_block_w.has_value() || z.profile->metadata.p_block_w.has_value(),
                   "ZeusDefaults::p_block_w",
                   Format("%s has no p_block_w metadata line, so Zeus jobs could not be planned: "
                          "set ZeusDefaults::p_block_w (the GPU's power while blocked, W)",
                          z.profile_name.c_str()));
    // Refused now, as a job given it would refuse it (the one rule for a
    // profile's rows; a measured profile's odd rows are left out per job).
    model::PlannableRows(*z.profile, z.profile_name);
  }
  return options;
}

}  // namespace

Service::Service(const ServerOptions& options)
    : options_(Checked(options)),
      waiters_(
          options_, &metrics_, [this](std::uint64_t upload) { jobs_.DropUpload(upload); },
          [this](const std::string& line) { Log(line); }),
      jobs_(options_, &waiters_, &metrics_, [this](const std::string& line) { Log(line); }) {
  waiters_.Start();
  jobs_.Start();
}

Service::~Service() {
  BeginStop(0);
  Finish();
}

void Service::BeginStop(double wait_s) {
  jobs_.BeginStop();
  waiters_.BeginStop(wait_s);
}

void Service::Finish() {
  jobs_.Finish();
  waiters_.Finish();
}

void Service::Log(const std::string& line) {
  if (!options_.log) return;
  std::lock_guard<std::mutex> lock(log_mu_);
  options_.log(line);
}

std::optional<Reply> Service::Handle(Request& r, Parked* parked) {
  return Dispatch(*this, r, parked, [this](const std::string& line) { Log(line); });
}

std::optional<Reply> Service::Resumed(const Request& r, Parked* parked) {
  (void)r;
  return waiters_.Resumed(parked);
}

void Service::Forget(Parked* parked) {
  waiters_.Forget(parked);
}

}  // namespace joulepipe::serve
