// Plans from `joulepipe serve` over HTTP (coordinated_plan_state.hpp).
//
// Reports, training thread -> this feed's thread: a fixed ring of
// queue_capacity entries under `mutex_` (allocated once; pushing never
// allocates and holds the lock for a copy), drop-oldest when full. The
// background thread is the only user of `worker_client_`; Start() (the
// training thread) uses `start_client_`, before that thread exists. Each
// client's waits are cut short by its own cancel predicate: the stop flag
// for the background thread, Start()'s deadline for Start().
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coordinated_plan_state.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime {

namespace {

std::string Seconds(double s) {
  return model::Format("%g s", s);
}

// The client's kCancelled: this object is going away.
bool IsCancellation(const std::exception& e) {
  const auto* error = dynamic_cast<const CoordinatorError*>(&e);
  return error != nullptr && error->kind() == CoordinatorError::Kind::kCancelled;
}

// Throws InputError for options CoordinatorClient does not check itself.
void CheckOptions(const CoordinatedPlanOptions& o) {
  model::Require(!o.job_id.empty(), "CoordinatedPlanOptions::job_id",
                 "CoordinatedPlanOptions::job_id must name the job (the id RegisterJob returned)");
  auto wait_ok = [](double s) {
    return std::isfinite(s) && s >= 0 && s <= protocol::kMaxPlanWaitS;
  };
  model::Require(wait_ok(o.start_wait_s), "CoordinatedPlanOptions::start_wait_s",
                 model::Format("CoordinatedPlanOptions::start_wait_s must be between 0 and %g "
                               "seconds, the coordinator's longest long poll (got %g s)",
                               protocol::kMaxPlanWaitS, o.start_wait_s));
  model::Require(std::isfinite(o.start_timeout_s) && o.start_timeout_s > 0,
                 "CoordinatedPlanOptions::start_timeout_s",
                 model::Format("CoordinatedPlanOptions::start_timeout_s must be a positive number "
                               "of seconds (got %g s)",
                               o.start_timeout_s));
  model::Require(wait_ok(o.fetch_wait_s), "CoordinatedPlanOptions::fetch_wait_s",
                 model::Format("CoordinatedPlanOptions::fetch_wait_s must be between 0 and %g "
                               "seconds (got %g s)",
                               protocol::kMaxPlanWaitS, o.fetch_wait_s));
}

class CoordinatorFeed final : public PlanFeed {
 public:
  explicit CoordinatorFeed(CoordinatedPlan::State& state) : s_(state) {
    CheckOptions(s_.options);
    MakeClients();
    ring_.resize(s_.options.queue_capacity);
  }

  ~CoordinatorFeed() override { Stop(); }

  // Registers the rank when asked, long-polls for its first plan (bounded by
  // start_timeout_s), then starts the background thread.
  bool Start() override {
    const CoordinatedPlanOptions& o = s_.options;
    bool got = false;
    start_deadline_ = SteadyClock::now() + CoordinatedPlan::State::ToDuration(o.start_timeout_s);
    try {
      if (o.registration) {
        start_client_->RegisterRank(o.job_id, *o.registration);
        registered_ = true;
      }
      const double wait_s = std::min(o.start_wait_s, o.start_timeout_s);
      std::optional<protocol::RankPlan> plan =
          start_client_->WaitForPlan(o.job_id, o.rank, 0, wait_s);
      s_.connected.store(true, std::memory_order_relaxed);
      if (plan) {
        fetched_version_ = plan->version;
        s_.announced_version.store(plan->version, std::memory_order_relaxed);
        s_.Apply(std::move(*plan), "running");
        got = true;
      } else {
        s_.Log("the coordinator at " + url() + " has no plan for rank " + std::to_string(o.rank) +
               " of job '" + o.job_id + "' after " + Seconds(wait_s) +
               "; this rank keeps default clocks until one comes, training goes on");
      }
    } catch (const CoordinatorError& e) {
      LogStartFailure(e);
    } catch (const std::exception& e) {
      s_.Log(std::string("coordination failed at start: ") + e.what() +
             "; this rank keeps default clocks, training goes on");
    }
    try {
      worker_ = std::thread([this] { Run(); });
    } catch (const std::exception& e) {
      s_.Log(std::string("cannot start the coordinator thread: ") + e.what() +
             "; iterations are not reported");
    }
    return got;
  }

  // Queues the iteration's report for the background thread.
  void Report(std::int64_t iteration, double time_s,
              std::optional<double> energy_j) noexcept override {
    if (!worker_.joinable()) return;                    // not started
    if (!std::isfinite(time_s) || time_s <= 0) return;  // the server takes > 0 only
    if (energy_j && (!std::isfinite(*energy_j) || *energy_j < 0)) energy_j.reset();
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      if (count_ == ring_.size()) {
        head_ = (head_ + 1) % ring_.size();
        --count_;
        Bump(s_.reports_dropped);
      }
      protocol::IterationReport& slot = ring_[(head_ + count_) % ring_.size()];
      slot.rank = s_.options.rank;
      slot.iteration = iteration;
      slot.time_s = time_s;
      slot.energy_j = energy_j;
      ++count_;
    } catch (...) {
      return;  // nothing here allocates; a throwing mutex is the only way here
    }
    Bump(s_.reports_queued);
    wake_.notify_one();
  }

  std::string AppliedLine(const protocol::RankPlan& plan,
                          const std::vector<model::PlannedInstruction>& /*in*/, bool reordered,
                          const char* how) const override {
    return std::string(how) + " plan version " + std::to_string(plan.version) + " for rank " +
           std::to_string(plan.rank) + " (pipeline " + std::to_string(plan.pipeline) + ", stage " +
           std::to_string(plan.stage) + ") from the coordinator at " + url() +
           (plan.reason.empty() ? "" : ": " + plan.reason) +
           (reordered ? " (reordered to the order the loop ran)" : "");
  }

  // Within about 50 ms: a request in flight is abandoned, queued reports
  // are dropped.
  void Stop() noexcept override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true, std::memory_order_release);
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

 private:
  const std::string& url() const { return s_.options.coordinator.url; }

  // The two clients, each with its own way of being interrupted.
  void MakeClients() {
    const CoordinatorOptions& base = s_.options.coordinator;
    const std::function<bool()> user_cancelled = base.cancelled;

    CoordinatorOptions start = base;
    start.cancelled = [this, user_cancelled] {
      return SteadyClock::now() >= start_deadline_ || (user_cancelled && user_cancelled());
    };
    if (!start.sleep) {
      start.sleep = [this](double seconds) {
        const auto until = std::min(
            start_deadline_, SteadyClock::now() + CoordinatedPlan::State::ToDuration(seconds));
        std::this_thread::sleep_until(until);
      };
    }
    start_client_.emplace(std::move(start));

    CoordinatorOptions worker_options = base;
    worker_options.cancelled = [this, user_cancelled] {
      return stop_.load(std::memory_order_acquire) || (user_cancelled && user_cancelled());
    };
    if (!worker_options.sleep) {
      worker_options.sleep = [this](double seconds) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait_for(lock, CoordinatedPlan::State::ToDuration(seconds),
                       [this] { return stop_.load(); });
      };
    }
    worker_client_.emplace(std::move(worker_options));
  }

  void LogStartFailure(const CoordinatorError& e) {
    const std::string tail = "; this rank keeps default clocks, training goes on";
    const std::string attempts =
        std::to_string(e.attempts()) + " attempt" + (e.attempts() == 1 ? "" : "s");
    switch (e.kind()) {
      case CoordinatorError::Kind::kUnreachable:
        s_.Log("coordinator unreachable at " + url() + " after " + attempts +
               " (last error: " + e.last_error() + ")" + tail);
        return;
      case CoordinatorError::Kind::kCancelled:
        // Start()'s own deadline (or the caller's cancel predicate).
        if (e.last_error().empty()) {
          s_.Log("no answer from the coordinator at " + url() + " within " +
                 Seconds(s_.options.start_timeout_s) + tail);
        } else {
          s_.Log("coordinator unreachable at " + url() + " after " + attempts + " in " +
                 Seconds(s_.options.start_timeout_s) + " (last error: " + e.last_error() + ")" +
                 tail);
        }
        return;
      case CoordinatorError::Kind::kRejected:
      case CoordinatorError::Kind::kBadResponse:
        s_.Log(e.what() + tail);
        return;
    }
  }

  // Background thread: contact regained / lost, each logged once.
  void NoteConnected() {
    if (!s_.connected.exchange(true, std::memory_order_relaxed)) {
      s_.Log("coordinator at " + url() + " reachable; reporting iterations");
    }
  }
  void NoteLost(const std::string& why) {
    if (s_.connected.exchange(false, std::memory_order_relaxed)) {
      s_.Log("lost the coordinator at " + url() + ": " + why + "; " + s_.Keeps() +
             ", training goes on");
    }
  }

  void Run() {
    for (;;) {
      protocol::IterationReport report;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_.load() || count_ > 0; });
        if (stop_.load()) return;
        report = ring_[head_];
        head_ = (head_ + 1) % ring_.size();
        --count_;
      }
      if (!Exchange(report)) return;
    }
  }

  // One report and, when the answer names a version not fetched yet, that
  // plan. False once cancelled (the object is going away).
  bool Exchange(const protocol::IterationReport& report) {
    const CoordinatedPlanOptions& o = s_.options;
    CoordinatorClient& client = *worker_client_;
    int version = 0;
    try {
      if (o.registration && !registered_) {
        client.RegisterRank(o.job_id, *o.registration);
        registered_ = true;
      }
      version = client.ReportIteration(o.job_id, report);
    } catch (const std::exception& e) {
      if (IsCancellation(e)) return false;
      Bump(s_.reports_failed);
      NoteLost(e.what());
      return true;
    }
    Bump(s_.reports_sent);
    s_.announced_version.store(version, std::memory_order_relaxed);
    NoteConnected();
    if (version <= 0 || version == fetched_version_) return true;
    // after = version - 1 fetches `version` (or newer) whether it is above
    // or below what this rank has (a restarted coordinator counts from 1).
    try {
      std::optional<protocol::RankPlan> plan =
          client.WaitForPlan(o.job_id, o.rank, version - 1, o.fetch_wait_s);
      if (!plan) return true;  // not there after all; the next report asks again
      fetched_version_ = plan->version;
      Bump(s_.plans_fetched);
      s_.Deliver(std::move(*plan));
    } catch (const std::exception& e) {
      if (IsCancellation(e)) return false;
      Bump(s_.fetch_failures);
      NoteLost(e.what());
    }
    return true;
  }

  CoordinatedPlan::State& s_;
  std::optional<CoordinatorClient> start_client_;
  std::optional<CoordinatorClient> worker_client_;  // the background thread's
  SteadyClock::time_point start_deadline_;

  // The report ring and the stop flag, under `mutex_`; `wake_` wakes the
  // background thread for a report or the stop, and ends its sleeps.
  // `stop_` is atomic too, for the cancel predicates that read it without
  // the lock.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::vector<protocol::IterationReport> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::thread worker_;

  // Background thread (and Start() before it exists).
  int fetched_version_ = 0;
  bool registered_ = false;
};

}  // namespace

std::unique_ptr<PlanFeed> MakeCoordinatorFeed(CoordinatedPlan::State& state) {
  return std::make_unique<CoordinatorFeed>(state);
}

}  // namespace joulepipe::runtime
