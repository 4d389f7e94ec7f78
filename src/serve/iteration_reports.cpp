// Jobs: iteration reports into coord::Job, and the plan switches they cause
// (stored, counted, their waits woken).
#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;

// One iteration report into the job: counted in the metrics (with the
// saving of the plan in force); a switch it causes is stored and wakes the
// job's waits. mu_ held.
void Jobs::FeedReport(Entry& e, const protocol::IterationReport& report, Wakeups* wakeups,
                      coord::Job::Numbering numbering) {
  coord::Job& job = e.job;
  const std::int64_t before = job.completed_iterations();
  const double saving = SavingInForce(job);
  const std::optional<protocol::PlanSwitch> s = job.ReportIteration(report, NowUnix(), numbering);
  metrics_->CountReport(job.completed_iterations() - before, saving);
  if (s) {
    StoreSwitch(e, *s);
    WakeReady(e, wakeups);
  }
}

void Jobs::StoreSwitch(Entry& e, const protocol::PlanSwitch& s) {
  const std::string& id = e.job.config().job_id;
  try {
    store_.Write([&] { store_.PutSwitch(id, s.version, protocol::PlanSwitchToJson(s).dump()); });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  metrics_->CountSwitch();
  log_(Format("job %s: plan version %d from iteration %lld: %s", id.c_str(), s.version,
              static_cast<long long>(s.iteration), s.reason.c_str()));
}

int Jobs::Report(const std::string& id, const protocol::IterationReport& report) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(id);
  FeedReport(*e, report, &wake);
  return e->job.plan_version();
}

void Jobs::ReportNumbered(const std::string& id, int rank,
                          const std::vector<protocol::IterationReport>& reports,
                          const std::string& rank_field, const std::string& register_hint) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(id);
  if (e->job.ranks().count(rank) == 0) {
    throw coord::RankConflictError(
        rank_field, Format("rank %d is not registered with job %s; register it first (%s)", rank,
                           e->job.config().job_id.c_str(), register_hint.c_str()));
  }
  std::int64_t& next = e->zeus_iteration[rank];
  for (protocol::IterationReport report : reports) {
    report.rank = rank;
    report.iteration = next++;
    FeedReport(*e, report, &wake, coord::Job::Numbering::kByServer);
  }
}

}  // namespace joulepipe::serve
