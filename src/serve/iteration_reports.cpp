// Iteration reports into coord::Job, and the plan switches they cause
// (stored, counted, their waiters woken).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

// One iteration report into the job: counted in the metrics (with the
// saving of the plan in force); a switch it causes is stored and wakes the
// job's waiters (claimed, to be resumed once mu_ is released). mu_ held.
void Service::FeedReport(Entry& e, const coord::IterationReport& report,
                         std::vector<Parked*>* claimed, coord::Job::Numbering numbering) {
  coord::Job& job = e.job;
  const std::int64_t before = job.completed_iterations();
  const double saving = SavingInForce(job);
  const std::optional<coord::PlanSwitch> s = job.ReportIteration(report, NowUnix(), numbering);
  metrics_.CountReport(job.completed_iterations() - before, saving);
  if (s) {
    StoreSwitch(e, *s);
    WakeReady(e, claimed);
  }
}

void Service::StoreSwitch(Entry& e, const coord::PlanSwitch& s) {
  const std::string& id = e.job.config().job_id;
  try {
    store_.Write([&] { store_.PutSwitch(id, s.version, PlanSwitchToJson(s).dump()); });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  metrics_.CountSwitch();
  Log(Format("job %s: plan version %d from iteration %lld: %s", id.c_str(), s.version,
             static_cast<long long>(s.iteration), s.reason.c_str()));
}

Reply Service::ReportIteration(const Request& r) {
  const coord::IterationReport report = IterationReportFromJson(ParseBody(r.body));
  std::vector<Parked*> claimed;
  int version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const EntryPtr e = FindAndTouch(r.match.job_id);
    coord::Job& job = e->job;
    FeedReport(*e, report, &claimed);
    version = job.plan_version();
  }
  ResumeAll(claimed);
  return JsonReply(200, {{"plan_version", version}});
}

}  // namespace joulepipe::serve
