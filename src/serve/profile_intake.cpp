// Jobs: profile uploads and other large bodies, parked on the HTTP thread,
// parsed and checked on the intake thread, applied (memory and store) under
// the jobs' lock.
#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/format.hpp"
#include "router.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

// A profile upload is parsed and checked on the intake thread, not on the
// HTTP thread: the request is parked (its connection suspended) until its
// answer exists, so a 64 MiB upload stalls no other request.
std::optional<Reply> Jobs::QueueProfile(const std::string& job_id, std::string body,
                                        Parked* parked) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(job_id);
  e->job.CheckProfileMayChange();
  if (stopping_) return Unavailable();
  Upload item;
  item.job_id = e->job.config().job_id;
  item.entry = e;
  item.request = e->job.PlanRequest();
  item.body = std::move(body);
  return ParkForIntake(std::move(item), parked);
}

// A large JSON body (a Zeus result) is parsed on the intake thread too: one
// parse of 1 MiB takes milliseconds, and a burst of them on the HTTP thread
// held every other request (/healthz answered after 6.2 s).
std::optional<Reply> Jobs::QueueBody(const std::string& job_id, std::string body, Parked* parked,
                                     std::function<Reply(const std::string& body)> work) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(job_id);
  if (stopping_) return Unavailable();
  Upload item;
  item.job_id = e->job.config().job_id;
  item.entry = e;
  item.body = std::move(body);
  item.work = std::move(work);
  return ParkForIntake(std::move(item), parked);
}

std::optional<Reply> Jobs::ParkForIntake(Upload item, Parked* parked) {
  {
    // The body's bytes are reserved before the request parks and the item
    // is queued after: the intake thread never sees an upload whose
    // request is not parked yet.
    std::lock_guard<std::mutex> intake(intake_mu_);
    if (intake_bytes_ + item.body.size() > kMaxIntakeBytes) {
      Reply busy = ErrorReply(
          503, Format("the server is checking %s of uploads already (at most %zu MiB "
                      "queued); nothing was changed; retry in a moment",
                      intake_bytes_ >= (1u << 20) ? Format("%zu MiB", intake_bytes_ >> 20).c_str()
                                                  : Format("%zu bytes", intake_bytes_).c_str(),
                      kMaxIntakeBytes >> 20));
      busy.headers.emplace_back("Retry-After", "2");
      return busy;
    }
    intake_bytes_ += item.body.size();
    item.id = next_upload_++;
  }
  Parked::Wait w;
  w.what = Parked::Wait::For::kUpload;
  w.job_id = item.job_id;
  w.upload = item.id;
  std::optional<Reply> refused = waiters_->Park(parked, std::move(w), 0);
  std::lock_guard<std::mutex> intake(intake_mu_);
  if (refused) {
    intake_bytes_ -= item.body.size();
    return refused;
  }
  intake_queue_.push_back(std::move(item));
  intake_cv_.notify_one();
  return std::nullopt;
}

void Jobs::DropUpload(std::uint64_t upload) {
  std::lock_guard<std::mutex> lock(intake_mu_);
  for (auto it = intake_queue_.begin(); it != intake_queue_.end(); ++it) {
    if (it->id == upload) {
      intake_bytes_ -= it->body.size();
      intake_queue_.erase(it);
      return;
    }
  }
}

void Jobs::IntakeLoop() {
  for (;;) {
    Upload item;
    {
      std::unique_lock<std::mutex> lock(intake_mu_);
      intake_cv_.wait(lock, [&] { return intake_stopping_ || !intake_queue_.empty(); });
      if (intake_stopping_) return;
      item = std::move(intake_queue_.front());
      intake_queue_.pop_front();
      intake_bytes_ -= item.body.size();
    }
    // A request already answered (its client hung up, the job was deleted,
    // the server is stopping) is dropped unparsed.
    if (!waiters_->UploadWaiting(item.id)) continue;
    Reply reply;
    try {
      reply = item.work ? item.work(item.body) : ApplyProfile(item);
    } catch (const InputError& e) {
      // The body's schema is any string (docs/openapi.yaml): what the
      // profile's reader and checks refuse in it are rules the schema cannot
      // state, so 422, not 400.
      reply =
          ErrorFor(std::make_exception_ptr(HttpError(422, e.what(), e.field())), NativeApi(), log_);
    } catch (...) {
      reply = ErrorFor(std::current_exception(), NativeApi(), log_);
    }
    waiters_->AnswerUpload(item.id, std::move(reply));
  }
}

Reply Jobs::ApplyProfile(Upload& item) {
  const std::string& job_id = item.job_id;
  const EntryPtr& e = item.entry;
  // Parsing and the profile's checks (the cheap half of planning) run
  // outside the lock, on the intake thread; coord::Job::SetProfile leaves
  // out the rows coord::PlanWork does.
  model::Profile profile = model::ParseProfileCsv(item.body, "the uploaded profile");
  const double work = coord::PlanWork(profile, item.request);
  const int rows = profile.num_rows();
  const int stages = profile.num_stages();
  // The one rule for its rows, its (bounded) notes and the form it is
  // stored in, here too: under the lock setting it is O(1), whatever the
  // rows (one upload of 18 MB took the lock for 22 s when the notes were
  // built under it).
  coord::PreparedProfile prepared = coord::PrepareProfile(profile, item.job_id);
  std::string().swap(item.body);  // the bytes are not kept: the rows are
  profile = model::Profile();

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) throw HttpError(503, "the server is stopping; nothing was changed; retry");
  const EntryPtr now = Find(job_id);
  if (now != e) throw HttpError(404, "job " + job_id + " was deleted during the upload");
  const std::string& id = e->job.config().job_id;
  e->job.SetProfile(std::move(prepared));  // JobStateError once planned
  ++e->profile_generation;
  e->plan_work = work;
  e->solve_overran = false;
  try {
    store_.Write([&] {
      store_.PutProfile(id, e->job.profile_csv());
      store_.SetFailure(id, "");
    });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  log_(Format("job %s: profile set (%d rows, %d stages)%s", id.c_str(), rows, stages,
              e->job.ready_to_plan()
                  ? ""
                  : Format("; waiting for ranks (%d of %lld registered)", e->job.registered_ranks(),
                           static_cast<long long>(e->job.config().world_size))
                        .c_str()));
  if (e->job.ready_to_plan()) QueuePlan(*e);
  return JsonReply(200, {{"rows", rows}});
}

}  // namespace joulepipe::serve
