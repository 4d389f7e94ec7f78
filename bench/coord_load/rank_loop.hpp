// The run's options and the simulated ranks: one event loop (libcurl multi
// over epoll) driving every rank's registration, long polls and reports.
// Included by bench/coord_load.cpp only (one translation unit).
#pragma once

#include "common.hpp"
#include "http_client.hpp"

namespace {

// ---- The run ------------------------------------------------------------------

struct Options {
  std::string server;
  std::string profile =
      std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv";
  int ranks = 1024;
  int iterations = 100;
  int spread_ms = 0;
  bool keep_alive = true;
  bool in_memory = false;   // the server without --db (no SQLite writes)
  bool preconnect = false;  // each rank connects (GET /healthz) before the registrations
  double watchdog_s = 300;
  std::vector<std::string> serve_args;  // --serve-arg: appended to the server's command line
};

struct RankResult {
  double registered_at_s = -1;  // the registration's answer arrived
  double plan_at_s = -1;        // the first plan arrived
  int version = 0;              // the plan version it runs at the end
  int fetches = 0;              // plans fetched after a version rise
  int not_ready = 0;            // fetches answered 204 (the new plan was not there)
  Recorder rec;
};

// ---- The ranks' event loop (libcurl multi over epoll) --------------------------

// What the loop saw besides the routes' latencies.
struct LoopFigures {
  int comebacks = 0;      // plan waits answered 204 + Retry-After (asked again later)
  int retries = 0;        // requests retried after a transient failure
  long connects = 0;      // TCP connections libcurl opened
  double loop_cpu_s = 0;  // CPU of this process while the loop ran (monitors included)
};

// Every rank as a state machine, all driven by one thread: register, wait
// for the plan (coming back when told to: 204 + Retry-After, as
// runtime::CoordinatorClient::WaitForPlan does), then per iteration report
// and, when the answer names a newer version, fetch it; a barrier between
// iterations. Transient failures (refused, reset, timed out, 5xx) are
// retried like the runtime client (5 attempts, 0.2 s doubling backoff,
// jitter 0.5); anything else fails the run.
class RankLoop {
 public:
  std::function<void()> on_registered, on_all_planned;

  RankLoop(int port, const Options& opt, int straggler, std::int64_t slow_begin,
           std::int64_t slow_end, std::vector<RankResult>* results)
      : base_("http://127.0.0.1:" + std::to_string(port)),
        opt_(opt),
        straggler_(straggler),
        slow_begin_(slow_begin),
        slow_end_(slow_end),
        results_(results) {
    multi_ = curl_multi_init();
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &RankLoop::OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &RankLoop::OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    // Keep one connection per rank (the default cache is sized by the
    // handles added at the moment, and would close idle ranks' ones).
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(opt.ranks + 16));
    std::vector<int> mhz;
    for (int f = 1410; f >= 210; f -= 15) mhz.push_back(f);
    ranks_.resize(opt.ranks);
    for (int k = 0; k < opt.ranks; ++k) {
      Rank& r = ranks_[k];
      r.rank = k;
      // Rank = (dp x pp + pp) x tp + tp, Megatron's order with tp innermost.
      r.tp = k % kTp;
      r.pp = (k / kTp) % kPp;
      r.dp = k / (kTp * kPp);
      r.rng.seed(static_cast<unsigned>(k) * 7919u + 17u);
      r.easy = curl_easy_init();
      r.info = json{
          {"rank", k},
          {"dp_rank", r.dp},
          {"pp_rank", r.pp},
          {"tp_rank", r.tp},
          {"available_frequencies",
           mhz}}.dump();
    }
    headers_json_ = curl_slist_append(nullptr, "Content-Type: application/json");
    headers_json_ = curl_slist_append(headers_json_, "Expect:");
    if (!opt.keep_alive) headers_json_ = curl_slist_append(headers_json_, "Connection: close");
    headers_get_ = opt.keep_alive ? nullptr : curl_slist_append(nullptr, "Connection: close");
  }

  ~RankLoop() {
    for (Rank& r : ranks_) {
      if (r.active) curl_multi_remove_handle(multi_, r.easy);
      curl_easy_cleanup(r.easy);
    }
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_json_);
    curl_slist_free_all(headers_get_);
    ::close(epoll_);
  }

  // False when a request failed for good (*error says which).
  bool Run(std::string* error) {
    const double cpu0 = ProcessCpu();
    const double t0 = Now();
    for (Rank& r : ranks_) {
      if (opt_.preconnect) {
        After(t0, 0, r.rank, Action::kConnect);
      } else {
        After(t0, Spread(r), r.rank, Action::kRegister);
      }
    }
    std::vector<epoll_event> events(1024);
    int running = 0;
    while (!done_ && error_.empty()) {
      const double now = Now();
      while (!timers_.empty() && timers_.top().at <= now && error_.empty()) {
        const Timer t = timers_.top();
        timers_.pop();
        Act(ranks_[t.rank], t.action);
      }
      double wake = now + 0.1;
      if (!timers_.empty()) wake = std::min(wake, timers_.top().at);
      if (curl_due_ >= 0) wake = std::min(wake, curl_due_);
      const int ms = std::max(0, static_cast<int>(std::ceil((wake - Now()) * 1e3)));
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), ms);
      for (int k = 0; k < n; ++k) {
        int flags = 0;
        if (events[k].events & EPOLLIN) flags |= CURL_CSELECT_IN;
        if (events[k].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
        if (events[k].events & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(multi_, events[k].data.fd, flags, &running);
      }
      if (curl_due_ >= 0 && Now() >= curl_due_) {
        curl_due_ = -1;
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      }
      int queued = 0;
      while (CURLMsg* m = curl_multi_info_read(multi_, &queued)) {
        if (m->msg != CURLMSG_DONE) continue;
        Rank* r = nullptr;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&r));
        const CURLcode code = m->data.result;
        curl_multi_remove_handle(multi_, m->easy_handle);
        r->active = false;
        Done(*r, code);
      }
    }
    figures_.loop_cpu_s = ProcessCpu() - cpu0;
    *error = error_;
    return error_.empty();
  }

  const LoopFigures& figures() const { return figures_; }

 private:
  enum class Step { kConnect, kRegister, kWait, kReport, kFetch };
  enum class Action { kConnect, kRegister, kWait, kReport, kResend };

  struct Rank {
    int rank = 0, tp = 0, pp = 0, dp = 0;
    CURL* easy = nullptr;
    bool active = false;
    Step step = Step::kRegister;
    Route route = kRegisterRank;
    std::string method, target, url, body, in, info;
    std::optional<double> retry_after;
    double started = 0;
    int attempt = 1;
    std::mt19937 rng;
    double time_s = 0, energy_j = 0;
    std::int64_t it = 0;
  };
  struct Timer {
    double at;
    std::uint64_t seq;
    int rank;
    Action action;
    bool operator<(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  static double ProcessCpu() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
           u.ru_stime.tv_usec * 1e-6;
  }

  double Spread(Rank& r) {
    if (opt_.spread_ms <= 0) return 0;
    return std::uniform_int_distribution<int>(0, opt_.spread_ms * 1000)(r.rng) * 1e-6;
  }
  void After(double from, double delay, int rank, Action action) {
    timers_.push({from + delay, seq_++, rank, action});
  }

  void Act(Rank& r, Action action) {
    switch (action) {
      case Action::kConnect:
        Send(r, Step::kConnect, kRoutes, "GET", "/healthz", "");
        break;
      case Action::kRegister:
        Send(r, Step::kRegister, kRegisterRank, "POST", "/jobs/load/ranks", r.info);
        break;
      case Action::kWait:
        Send(r, Step::kWait, kPlanWait, "GET",
             "/jobs/load/plan?rank=" + std::to_string(r.rank) +
                 "&after=0&wait_s=" + std::to_string(static_cast<int>(kPlanWaitS)),
             "");
        break;
      case Action::kReport: {
        const bool slowed = r.dp == straggler_ && r.it >= slow_begin_ && r.it < slow_end_;
        const double slow = slowed ? kSlowdown : 1.0;
        const json report = {{"rank", r.rank},
                             {"iteration", r.it},
                             {"time_s", r.time_s * slow},
                             {"energy_j", r.energy_j / kPp * slow}};
        Send(r, Step::kReport, kReportIteration, "POST", "/jobs/load/iterations", report.dump());
        break;
      }
      case Action::kResend:
        Start(r);
        break;
    }
  }

  void Send(Rank& r, Step step, Route route, const char* method, std::string target,
            std::string body) {
    r.step = step;
    r.route = route;
    r.method = method;
    r.target = std::move(target);
    r.body = std::move(body);
    r.attempt = 1;
    Start(r);
  }

  // (Re)issues the rank's current request.
  void Start(Rank& r) {
    CURL* e = r.easy;
    curl_easy_reset(e);
    r.url = base_ + r.target;
    curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
    curl_easy_setopt(e, CURLOPT_PRIVATE, &r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(kRequestTimeoutS * 1e3));
    const double timeout = r.step == Step::kWait ? kPlanWaitS + 30 : kRequestTimeoutS;
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout * 1e3));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &RankLoop::OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &RankLoop::OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &r);
    if (r.method == "POST") {
      curl_easy_setopt(e, CURLOPT_POST, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(r.body.size()));
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_json_);
    } else if (headers_get_ != nullptr) {
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_get_);
    }
    r.in.clear();
    r.retry_after.reset();
    r.started = Now();
    r.active = true;
    curl_multi_add_handle(multi_, e);
  }

  void Fail(const Rank& r, const std::string& what) {
    if (error_.empty()) {
      error_ = "rank " + std::to_string(r.rank) + ", " + r.method + " " + r.target + ": " + what;
    }
  }

  void Done(Rank& r, CURLcode code) {
    long status = 0, connects = 0;
    curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(r.easy, CURLINFO_NUM_CONNECTS, &connects);
    figures_.connects += connects;
    RankResult& me = (*results_)[r.rank];
    if (r.route != kRoutes) me.rec.samples[r.route].push_back({r.started, Now() - r.started});
    const bool transient = code != CURLE_OK || status >= 500 || status == 408 || status == 429;
    if (transient) {
      if (r.attempt < 5) {
        // The runtime client's backoff: 0.2 s doubling, shortened by up
        // to half at random.
        const double backoff = 0.2 * std::pow(2.0, r.attempt - 1) *
                               (1 - 0.5 * std::uniform_real_distribution<double>(0, 1)(r.rng));
        ++r.attempt;
        ++figures_.retries;
        After(Now(), backoff, r.rank, Action::kResend);
        return;
      }
      if (r.route != kRoutes) ++me.rec.failures[r.route];
      Fail(r, code != CURLE_OK ? std::string(curl_easy_strerror(code))
                               : "HTTP " + std::to_string(status) + " " + r.in.substr(0, 300));
      return;
    }
    switch (r.step) {
      case Step::kConnect:
        // --preconnect: every rank connected; then all register at once.
        if (status != 200) return Refused(r, status);
        if (++connected_ == opt_.ranks) {
          const double now = Now();
          for (Rank& x : ranks_) After(now, Spread(x), x.rank, Action::kRegister);
        }
        return;
      case Step::kRegister:
        if (status != 200) return Refused(r, status);
        me.registered_at_s = Now();
        if (on_registered) on_registered();
        Act(r, Action::kWait);
        return;
      case Step::kWait:
        if (status == 204) {
          if (r.retry_after) {
            ++figures_.comebacks;
            After(Now(), std::min(*r.retry_after, 60.0), r.rank, Action::kWait);
          } else {
            Act(r, Action::kWait);  // the long poll's deadline: ask again
          }
          return;
        }
        if (status != 200 || !ReadPlan(r)) return Refused(r, status);
        me.plan_at_s = Now();
        if (++planned_ == opt_.ranks) {
          if (on_all_planned) on_all_planned();
          StartIteration();
        }
        return;
      case Step::kReport: {
        if (status != 200) return Refused(r, status);
        const json answer = json::parse(r.in, nullptr, false);
        int version = 0;
        if (answer.is_object() && answer.contains("plan_version") &&
            answer.at("plan_version").is_number_integer()) {
          version = answer.at("plan_version").get<int>();
        }
        if (version > me.version) {
          ++me.fetches;
          Send(r, Step::kFetch, kPlanFetch, "GET",
               "/jobs/load/plan?rank=" + std::to_string(r.rank) +
                   "&after=" + std::to_string(me.version) + "&wait_s=0",
               "");
          return;
        }
        Arrive();
        return;
      }
      case Step::kFetch:
        if (status == 204) {
          ++me.not_ready;
        } else if (status != 200 || !ReadPlan(r)) {
          return Refused(r, status);
        }
        Arrive();
        return;
    }
  }

  void Refused(Rank& r, long status) {
    if (r.route != kRoutes) ++(*results_)[r.rank].rec.failures[r.route];
    Fail(r, status == 200 ? "a plan of an unexpected shape: " + r.in.substr(0, 300)
                          : "HTTP " + std::to_string(status) + " " + r.in.substr(0, 300));
  }

  // The plan's shape: the rank's own, a version, a predicted time and
  // instructions (json::value throws on a member of another type).
  bool ReadPlan(Rank& r) {
    try {
      const json p = json::parse(r.in, nullptr, false);
      if (p.is_object() && p.value("rank", -1) == r.rank && p.value("pipeline", -1) == r.dp &&
          p.value("stage", -1) == r.pp && p.contains("predicted") &&
          p.at("predicted").is_object() && p.contains("instructions") &&
          p.at("instructions").is_array() && !p.at("instructions").empty() &&
          p.value("version", 0) >= 1 && p.at("predicted").value("time_s", 0.0) > 0) {
        (*results_)[r.rank].version = p.at("version").get<int>();
        r.time_s = p.at("predicted").at("time_s").get<double>();
        r.energy_j = p.at("predicted").value("energy_j", 0.0);
        return true;
      }
    } catch (const json::exception&) {
    }
    return false;
  }

  // Every rank has finished iteration it_ (or has its plan): the next one.
  void StartIteration() {
    if (it_ >= opt_.iterations) {
      done_ = true;
      return;
    }
    arrived_ = 0;
    const double now = Now();
    for (Rank& r : ranks_) {
      r.it = it_;
      After(now, Spread(r), r.rank, Action::kReport);
    }
  }
  void Arrive() {
    if (++arrived_ < opt_.ranks) return;
    ++it_;
    StartIteration();
  }

  static std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
    auto* r = static_cast<Rank*>(user);
    r->in.append(data, size * n);
    return size * n;
  }
  static std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
    auto* r = static_cast<Rank*>(user);
    const std::string line(data, size * n);
    if (line.size() > 12 && strncasecmp(line.c_str(), "retry-after:", 12) == 0) {
      r->retry_after = std::atof(line.c_str() + 12);
    }
    return size * n;
  }
  static int OnSocket(CURL*, curl_socket_t s, int what, void* user, void*) {
    auto* self = static_cast<RankLoop*>(user);
    if (what == CURL_POLL_REMOVE) {
      ::epoll_ctl(self->epoll_, EPOLL_CTL_DEL, s, nullptr);
      return 0;
    }
    epoll_event ev{};
    ev.data.fd = s;
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    if (::epoll_ctl(self->epoll_, EPOLL_CTL_MOD, s, &ev) != 0) {
      ::epoll_ctl(self->epoll_, EPOLL_CTL_ADD, s, &ev);
    }
    return 0;
  }
  static int OnTimer(CURLM*, long timeout_ms, void* user) {
    auto* self = static_cast<RankLoop*>(user);
    self->curl_due_ = timeout_ms < 0 ? -1 : Now() + timeout_ms * 1e-3;
    return 0;
  }

  std::string base_;
  const Options& opt_;
  int straggler_;
  std::int64_t slow_begin_, slow_end_;
  std::vector<RankResult>* results_;
  CURLM* multi_ = nullptr;
  int epoll_ = -1;
  curl_slist* headers_json_ = nullptr;
  curl_slist* headers_get_ = nullptr;
  std::vector<Rank> ranks_;
  std::priority_queue<Timer> timers_;
  std::uint64_t seq_ = 0;
  double curl_due_ = -1;
  int connected_ = 0, planned_ = 0, arrived_ = 0;
  std::int64_t it_ = 0;
  bool done_ = false;
  std::string error_;
  LoopFigures figures_;
};

}  // namespace
