// Profile uploads: parked on the HTTP thread, parsed and checked on the
// intake thread, applied (memory and store) under the lock.
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

// A profile upload is parsed and checked on the intake thread, not on the
// HTTP thread: the request is parked (its connection suspended) until its
// answer exists, so a 64 MiB upload stalls no other request.
std::optional<Reply> Service::PutProfile(Request& r, Parked* parked) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(r.match.job_id);
  e->job.CheckProfileMayChange();
  if (stopping_) return Unavailable();
  if (intake_bytes_ + r.body.size() > kMaxIntakeBytes) {
    Reply busy = ErrorReply(
        503, Format("the server is checking %s of profile uploads already (at most %zu MiB "
                    "queued); nothing was changed; retry in a moment",
                    intake_bytes_ >= (1u << 20) ? Format("%zu MiB", intake_bytes_ >> 20).c_str()
                                                : Format("%zu bytes", intake_bytes_).c_str(),
                    kMaxIntakeBytes >> 20));
    busy.headers.emplace_back("Retry-After", "2");
    return busy;
  }
  Intake item;
  item.id = next_intake_++;
  item.job_id = e->job.config().job_id;
  item.entry = e;
  item.request = e->job.PlanRequest();
  item.body = std::move(r.body);
  Parked::Wait w;
  w.job_id = item.job_id;
  w.intake = item.id;
  parked->wait = w;
  Park(parked);
  intake_waiters_[item.id] = parked;
  intake_bytes_ += item.body.size();
  intake_queue_.push_back(std::move(item));
  intake_cv_.notify_one();
  return std::nullopt;
}

void Service::IntakeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    intake_cv_.wait(lock, [&] { return stopping_ || !intake_queue_.empty(); });
    if (stopping_) return;
    Intake item = std::move(intake_queue_.front());
    intake_queue_.pop_front();
    intake_bytes_ -= item.body.size();
    // A request already answered (its client hung up, the job was deleted,
    // the server is stopping) is dropped unparsed: DropIntake took it out
    // of the queue already unless it was claimed in between.
    if (!intake_waiters_.count(item.id)) continue;
    lock.unlock();
    Reply reply;
    try {
      reply = ApplyProfile(item, std::move(item.body));
    } catch (...) {
      reply = ErrorFor(std::current_exception(), false);
    }
    lock.lock();
    // The request may be gone (its client hung up, the job was deleted,
    // the server is stopping): then whoever claimed it answered it.
    const auto waiter = intake_waiters_.find(item.id);
    if (waiter == intake_waiters_.end()) continue;
    Parked* p = waiter->second;
    std::vector<Parked*> claimed;
    p->wait.reply = std::move(reply);
    Claim(p, Parked::Outcome::kReady, &claimed);
    lock.unlock();
    ResumeAll(claimed);
    lock.lock();
  }
}

void Service::DropIntake(std::uint64_t id) {
  for (auto it = intake_queue_.begin(); it != intake_queue_.end(); ++it) {
    if (it->id == id) {
      intake_bytes_ -= it->body.size();
      intake_queue_.erase(it);
      return;
    }
  }
}

Reply Service::ApplyProfile(const Intake& item, std::string body) {
  const std::string& job_id = item.job_id;
  const EntryPtr& e = item.entry;
  // Parsing and the profile's checks (the cheap half of planning) run
  // outside the lock, on the intake thread.
  model::Profile profile = model::ParseProfileCsv(body, "the uploaded profile");
  // The checks on what the job will plan with (coord::Job::SetProfile
  // leaves out the same rows).
  const double work = PlanWork(
      solver::PreparePipelinePlan(coord::PlannableProfile(profile, nullptr), item.request));
  const int rows = profile.num_rows();
  const int stages = profile.num_stages();

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) throw HttpError(503, "the server is stopping; nothing was changed; retry");
  const EntryPtr now = Find(job_id);
  if (now != e) throw HttpError(404, "job " + job_id + " was deleted during the upload");
  const std::string& id = e->job.config().job_id;
  e->job.SetProfile(std::move(profile), std::move(body));  // JobStateError once planned
  ++e->profile_generation;
  e->plan_work = work;
  try {
    store_.Write([&] {
      store_.PutProfile(id, e->job.profile_csv());
      store_.SetFailure(id, "");
    });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  Log(Format("job %s: profile set (%d rows, %d stages)%s", id.c_str(), rows, stages,
             e->job.ready_to_plan()
                 ? ""
                 : Format("; waiting for ranks (%d of %lld registered)", e->job.registered_ranks(),
                          static_cast<long long>(e->job.config().world_size))
                       .c_str()));
  if (e->job.ready_to_plan()) QueuePlan(id);
  return JsonReply(200, {{"rows", rows}});
}

}  // namespace joulepipe::serve
