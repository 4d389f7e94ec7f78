// bench_coord_load: load test of `joulepipe serve` (issue 11, "Acceptance"),
// over loopback HTTP against the real server process.
//
// What it does:
//   1. Starts `joulepipe serve --host 127.0.0.1 --port 0 --db <tmp>/state.sqlite`
//      and reads the port from its "listening on http://127.0.0.1:PORT" line.
//   2. Registers a job (pp 8 x dp R/32 x tp 4, 1F1B, 16 microbatches) and
//      uploads the GPT-3 175B A100-SXM profile (8 stages).
//   3. R simulated ranks (1,024 by default), all driven by one event loop
//      over libcurl's multi interface (a state machine and a socket each, no
//      thread each), register their rank, then at once wait for their plan
//      (after=0, wait_s=120). The server holds up to its --max-waiting
//      waits without a thread each and tells the rest when to come back
//      (204 + Retry-After); those ranks ask again then, as
//      runtime::CoordinatorClient::WaitForPlan does. Measured: the time
//      from the last registration to each rank receiving its plan, and the
//      server's solve time (joulepipe_plan_solve_seconds in /metrics).
//      Transient failures (refused, reset, 5xx) are retried like the
//      runtime client (5 attempts, 0.2 s doubling backoff) and counted.
//   4. N iterations (100 by default), a barrier between them: each rank
//      reports {time_s = its plan's predicted time (x 1.2 for pipeline 3 in
//      iterations 30..59 of 100), energy_j = predicted energy / pp}. When an
//      answer's plan_version rises, the rank fetches its new plan
//      (after=<old>, wait_s=0) and runs it from the next iteration, as
//      runtime::CoordinatedPlan does. A monitor thread GETs the job's status
//      every 100 ms, another scrapes /metrics every 500 ms.
//   5. Samples the server's /proc/<pid>/status every 50 ms: peak RSS
//      (VmHWM) and thread count, also while the plans are awaited; the
//      bench's own thread count is reported separately.
//   6. Prints per route: count, throughput, p50/p99/max latency (client
//      side: send to full answer, including queueing at the server and this
//      process's scheduling; a rank's first request includes its TCP
//      connect), the server's own view from its histograms, the CPU time of
//      server and bench (they share the cores), and PASS/FAIL against the
//      targets:
//        * every rank has its plan within 2 s of the last registration plus
//          the solve time, plus 1 s per --max-waiting ranks told to come
//          back (the server spreads them to that many a second);
//        * p99 < 20 ms for every non-waiting request;
//        * no request failed; every iteration completed;
//        * the server's threads while all plans were awaited: at most 32
//          (a thread per waiting rank would be >= ranks);
//        * with a straggler, the plans switched and switched back.
//      Then SIGTERMs the server and removes the temporary directory.
//
// Bounded: every request has a timeout, and a watchdog (--watchdog-s, 300 by
// default) kills the server and exits 2 if the run has not finished. The
// server gets PR_SET_PDEATHSIG, so it does not outlive the bench.
//
// Usage: bench_coord_load [--server PATH] [--ranks R] [--iterations N]
//                         [--spread-ms S] [--in-memory] [--preconnect]
//                         [--no-keep-alive] [--watchdog-s S] [--profile CSV]
//   --server       the joulepipe binary (default: joulepipe next to this executable)
//   --ranks        a multiple of 32 (pp 8 x tp 4), default 1024
//   --iterations   default 100
//   --spread-ms    each rank waits a random 0..S ms before registering and
//                  before each report (default 0: all ranks send at the same
//                  instant, the worst burst; real ranks start and finish their
//                  iterations over tens to hundreds of ms)
//   --in-memory    run the server without --db (no SQLite file), to tell
//                  the store's share of a route's cost
//   --preconnect   each rank opens its connection (GET /healthz, not counted)
//                  before the registrations, to tell the TCP connect's share
//   --no-keep-alive  one connection per request (keep --iterations small:
//                  every request then uses an ephemeral port)
//   --serve-arg A  appended to the server's command line (repeat it), e.g.
//                  --serve-arg --max-waiting --serve-arg 4096
// Exit status: 0 all targets met, 1 a target missed, 2 the run failed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include "bench_stats.hpp"
#include "runtime/http_client.hpp"

namespace {

using joulepipe::bench::Percentile;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// The job's shape (the profile has 8 stages).
constexpr int kPp = 8;
constexpr int kTp = 4;
constexpr int kMicrobatches = 16;
constexpr double kPBlockW = 83.64;
constexpr double kSlowdown = 1.2;
constexpr int kStragglerPipeline = 3;

// Targets (issue 11).
constexpr double kPlanDeadlineS = 2.0;  // after the last registration, plus the solve
constexpr double kP99TargetS = 0.020;   // every non-waiting request
constexpr int kMaxServerThreadsWaiting = 32;

constexpr double kPlanWaitS = 120;       // the long poll's wait_s
constexpr double kRequestTimeoutS = 30;  // any non-waiting request

const SteadyClock::time_point g_t0 = SteadyClock::now();
double Now() {
  return std::chrono::duration<double>(SteadyClock::now() - g_t0).count();
}

// ---- The client: the runtime's HTTP client (libcurl) ----------------------

struct HttpResponse {
  int status = 0;  // 0: no answer (error says why)
  std::string body;
  std::string error;
};

// The runtime coordinator client's transport (src/runtime/http_client.hpp:
// libcurl, one kept connection per thread), so the bench measures the
// server through the client the ranks use, not a protocol copy of its own.
// keep_alive false sends "Connection: close" (a connection per request).
class HttpClient {
 public:
  HttpClient(int port, bool keep_alive)
      : endpoint_(joulepipe::runtime::http::ParseHttpUrl("http://127.0.0.1:" + std::to_string(port),
                                                         "bench")),
        keep_alive_(keep_alive) {}

  HttpResponse Send(const char* method, const std::string& target, const std::string& body,
                    const char* content_type, double timeout_s) {
    namespace http = joulepipe::runtime::http;
    http::Request request;
    request.method = method;
    request.target = target;
    request.body = body;
    if (content_type != nullptr) request.headers.emplace_back("Content-Type", content_type);
    if (!keep_alive_) request.headers.emplace_back("Connection", "close");
    http::Options options;
    options.connect_timeout_s = timeout_s;
    options.timeout_s = timeout_s;
    HttpResponse out;
    try {
      http::Response r = http::Send(endpoint_, request, options);
      out.status = r.status;
      out.body = std::move(r.body);
    } catch (const http::HttpError& e) {
      out.error = e.what();
    }
    return out;
  }

 private:
  joulepipe::runtime::http::Endpoint endpoint_;
  bool keep_alive_;
};

// ---- Latency records -----------------------------------------------------

enum Route {
  kCreateJob,
  kUploadProfile,
  kRegisterRank,
  kPlanWait,
  kPlanFetch,
  kReportIteration,
  kJobStatus,
  kMetricsScrape,
  kRoutes
};

const char* const kRouteNames[kRoutes] = {
    "POST /jobs",
    "PUT /jobs/{id}/profile",
    "POST /jobs/{id}/ranks",
    "GET /jobs/{id}/plan (long poll)",
    "GET /jobs/{id}/plan (fetch)",
    "POST /jobs/{id}/iterations",
    "GET /jobs/{id} (every 100 ms)",
    "GET /metrics (every 500 ms)",
};

// What each thread records, merged after it ends (no lock on the hot path).
struct Recorder {
  struct Sample {
    double start_s, latency_s;
  };
  std::vector<Sample> samples[kRoutes];
  int failures[kRoutes] = {};
  std::string first_failure;

  HttpResponse Timed(Route route, HttpClient& http, const char* method, const std::string& target,
                     const std::string& body, const char* content_type, double timeout_s) {
    const double start = Now();
    HttpResponse r = http.Send(method, target, body, content_type, timeout_s);
    samples[route].push_back({start, Now() - start});
    if (r.status < 200 || r.status >= 300) {
      ++failures[route];
      if (first_failure.empty()) {
        const std::string what =
            r.status == 0 ? r.error
                          : "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 300);
        first_failure = std::string(method) + " " + target + ": " + what;
      }
    }
    return r;
  }
};

// ---- The server process ----------------------------------------------------

std::atomic<pid_t> g_server_pid{-1};

// The server's output (stdout and stderr), kept in a file and its last lines.
class ServerLog {
 public:
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (file_) std::fprintf(file_, "%s\n", line.c_str());
    tail_.push_back(line);
    if (tail_.size() > 40) tail_.pop_front();
  }
  void Open(const std::string& path) { file_ = std::fopen(path.c_str(), "we"); }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    if (file_) std::fclose(file_);
    file_ = nullptr;
  }
  std::vector<std::string> Tail() {
    std::lock_guard<std::mutex> lock(mu_);
    return {tail_.begin(), tail_.end()};
  }

 private:
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::deque<std::string> tail_;
};

struct ServerProcess {
  pid_t pid = -1;
  int out = -1;  // the read end of its stdout+stderr
  int port = 0;
  std::string pending;  // output read but not yet split into lines
  std::thread drain;
};

// Splits complete lines off `pending`.
void TakeLines(std::string* pending, const std::function<void(const std::string&)>& each) {
  for (std::size_t eol; (eol = pending->find('\n')) != std::string::npos;) {
    std::string line = pending->substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    pending->erase(0, eol + 1);
    each(line);
  }
}

// Starts the server and waits (up to 60 s) for the line naming its port.
bool StartServer(const std::string& binary, const std::string& db,
                 const std::vector<std::string>& extra, ServerProcess* server, ServerLog* log,
                 std::string* error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(127);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    std::vector<const char*> argv = {binary.c_str(), "serve", "--host", "127.0.0.1", "--port", "0"};
    if (!db.empty()) {
      argv.push_back("--db");
      argv.push_back(db.c_str());
    }
    for (const std::string& a : extra) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    const char message[] = "bench_coord_load: exec of the server failed\n";
    (void)!::write(2, message, sizeof message - 1);
    _exit(127);
  }
  ::close(fds[1]);
  server->pid = pid;
  server->out = fds[0];
  g_server_pid = pid;

  const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(60);
  char buf[4096];
  while (server->port == 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      *error = "the server printed no \"listening on http://...\" line within 60 s";
      return false;
    }
    pollfd p{server->out, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(server->out, buf, sizeof buf);
    if (n <= 0) {
      *error = "the server exited before it listened";
      return false;
    }
    server->pending.append(buf, static_cast<std::size_t>(n));
    TakeLines(&server->pending, [&](const std::string& line) {
      log->Add(line);
      const std::size_t at = line.find("listening on http://");
      if (at == std::string::npos || server->port != 0) return;
      const std::size_t colon = line.find(':', at + std::strlen("listening on http://"));
      if (colon != std::string::npos) server->port = std::atoi(line.c_str() + colon + 1);
    });
  }
  server->drain = std::thread([server, log] {
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(server->out, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      server->pending.append(chunk, static_cast<std::size_t>(n));
      TakeLines(&server->pending, [&](const std::string& line) { log->Add(line); });
    }
    if (!server->pending.empty()) log->Add(server->pending);
  });
  return true;
}

// SIGTERM, then up to 15 s for the exit (SIGKILL after). Returns the time
// it took and how it ended.
std::string StopServer(ServerProcess* server, double* seconds) {
  std::string how;
  const double start = Now();
  if (server->pid > 0) {
    ::kill(server->pid, SIGTERM);
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(server->pid, &status, WNOHANG)) == 0 && Now() - start < 15) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {
      ::kill(server->pid, SIGKILL);
      ::waitpid(server->pid, &status, 0);
      how = "did not exit within 15 s of SIGTERM; killed";
    } else if (WIFEXITED(status)) {
      how = "exited with status " + std::to_string(WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      how = std::string("ended by signal ") + strsignal(WTERMSIG(status));
    }
    g_server_pid = -1;
    server->pid = -1;
  }
  *seconds = Now() - start;
  if (server->drain.joinable()) server->drain.join();
  if (server->out >= 0) ::close(server->out);
  server->out = -1;
  return how;
}

// ---- /proc sampling -----------------------------------------------------------

struct ProcStatus {
  long hwm_kb = -1, rss_kb = -1;
  int threads = -1;
};

ProcStatus ReadProcStatus(const std::string& path) {
  ProcStatus s;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kb = std::atol(line.c_str() + 6);
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::atol(line.c_str() + 6);
    if (line.rfind("Threads:", 0) == 0) s.threads = std::atoi(line.c_str() + 8);
  }
  return s;
}

// CPU seconds (user + system) used so far by the server and by this bench:
// the two share the machine's cores, so the bench's own share matters when
// reading its latencies.
struct CpuMark {
  double server_s = 0, client_s = 0;
};

CpuMark ReadCpu(pid_t server) {
  CpuMark m;
  std::ifstream in("/proc/" + std::to_string(server) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    // After "pid (comm)": state is field 3; utime and stime are fields 14, 15.
    std::istringstream fields(stat.substr(paren + 2));
    std::string f;
    unsigned long long utime = 0, stime = 0;
    for (int k = 3; k <= 15 && fields >> f; ++k) {
      if (k == 14) utime = std::strtoull(f.c_str(), nullptr, 10);
      if (k == 15) stime = std::strtoull(f.c_str(), nullptr, 10);
    }
    m.server_s = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  m.client_s = self.ru_utime.tv_sec + self.ru_utime.tv_usec * 1e-6 + self.ru_stime.tv_sec +
               self.ru_stime.tv_usec * 1e-6;
  return m;
}

// Phases of the run, for the samples.
enum Phase { kSetup, kRanks, kAwaiting, kIterations, kDone };
std::atomic<int> g_phase{kSetup};

struct ProcPeaks {
  long hwm_kb = 0, rss_kb = 0, hwm_kb_awaiting = 0;
  int threads = 0, threads_awaiting = 0, threads_iterations = 0;
  int client_threads = 0;
  int samples = 0;
};

// ---- /metrics parsing ---------------------------------------------------------

// The value of the first sample line "<name> <value>" (no labels).
std::optional<double> MetricValue(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::strtod(line.c_str() + name.size() + 1, nullptr);
  }
  return std::nullopt;
}

// The server's request-duration histogram per route: p50 and p99 as the
// upper bound of the bucket that holds them, and the count.
struct ServerRoute {
  std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
  double count = 0, sum = 0;
};

std::map<std::string, ServerRoute> ServerHistograms(const std::string& text,
                                                    const std::string& metric) {
  std::map<std::string, ServerRoute> out;
  std::istringstream in(text);
  std::string line;
  auto route_of = [](const std::string& l) {
    const std::size_t a = l.find("route=\"");
    if (a == std::string::npos) return std::string();
    const std::size_t b = l.find('"', a + 7);
    return l.substr(a + 7, b - a - 7);
  };
  while (std::getline(in, line)) {
    if (line.rfind(metric + "_bucket{", 0) == 0) {
      const std::size_t le = line.find("le=\"");
      const std::string bound = line.substr(le + 4, line.find('"', le + 4) - le - 4);
      const double b = bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr);
      const double n = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
      out[route_of(line)].buckets.emplace_back(b, n);
    } else if (line.rfind(metric + "_count{", 0) == 0) {
      out[route_of(line)].count = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    } else if (line.rfind(metric + "_sum{", 0) == 0) {
      out[route_of(line)].sum = std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    }
  }
  return out;
}

double BucketQuantile(const ServerRoute& r, double q) {
  for (const auto& [le, n] : r.buckets) {
    if (n >= q * r.count) return le;
  }
  return INFINITY;
}

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

std::string PathOfSelfDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

void Usage() {
  std::fprintf(stderr,
               "usage: bench_coord_load [--server PATH] [--ranks R (multiple of %d)] "
               "[--iterations N] [--spread-ms S] [--no-keep-alive] [--in-memory] "
               "[--preconnect] [--watchdog-s S] [--profile CSV] [--serve-arg ARG]...\n",
               kPp * kTp);
}

struct RouteFigures {
  std::size_t count = 0;
  int failures = 0;
  double rate = 0, p50 = 0, p99 = 0, max = 0;
};

RouteFigures Figures(const std::vector<Recorder::Sample>& s, int failures) {
  RouteFigures f;
  f.count = s.size();
  f.failures = failures;
  if (s.empty()) return f;
  std::vector<double> lat;
  lat.reserve(s.size());
  double first = INFINITY, last = 0;
  for (const Recorder::Sample& x : s) {
    lat.push_back(x.latency_s);
    first = std::min(first, x.start_s);
    last = std::max(last, x.start_s + x.latency_s);
  }
  f.rate = last > first ? static_cast<double>(s.size()) / (last - first) : 0;
  f.p50 = Percentile(lat, 0.5);
  f.p99 = Percentile(lat, 0.99);
  f.max = Percentile(lat, 1.0);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  opt.server = PathOfSelfDir() + "/joulepipe";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--server" && has_value) {
      opt.server = argv[++i];
    } else if (a == "--profile" && has_value) {
      opt.profile = argv[++i];
    } else if (a == "--ranks" && has_value) {
      opt.ranks = std::atoi(argv[++i]);
    } else if (a == "--iterations" && has_value) {
      opt.iterations = std::atoi(argv[++i]);
    } else if (a == "--spread-ms" && has_value) {
      opt.spread_ms = std::atoi(argv[++i]);
    } else if (a == "--watchdog-s" && has_value) {
      opt.watchdog_s = std::atof(argv[++i]);
    } else if (a == "--serve-arg" && has_value) {
      opt.serve_args.push_back(argv[++i]);
    } else if (a == "--preconnect") {
      opt.preconnect = true;
    } else if (a == "--in-memory") {
      opt.in_memory = true;
    } else if (a == "--no-keep-alive") {
      opt.keep_alive = false;
    } else {
      Usage();
      return 2;
    }
  }
  if (opt.ranks < kPp * kTp || opt.ranks % (kPp * kTp) != 0 || opt.iterations < 1 ||
      opt.spread_ms < 0 || opt.watchdog_s <= 0) {
    Usage();
    return 2;
  }
  const int dp = opt.ranks / (kPp * kTp);
  // The straggler: pipeline 3 (or the last one of fewer), slow in the middle
  // three tenths of the run; none with one pipeline (nothing to compare to).
  const int straggler = dp >= 2 ? std::min(kStragglerPipeline, dp - 1) : -1;
  const std::int64_t slow_begin = opt.iterations * 3 / 10, slow_end = opt.iterations * 6 / 10;

  std::string csv;
  {
    std::ifstream in(opt.profile, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "bench_coord_load: cannot read the profile %s\n", opt.profile.c_str());
      return 2;
    }
    std::ostringstream s;
    s << in.rdbuf();
    csv = s.str();
  }
  if (::access(opt.server.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "bench_coord_load: %s is not an executable (give --server PATH)\n",
                 opt.server.c_str());
    return 2;
  }

  // Sockets: one per rank, the monitors', and the server's (it raises its own).
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  const rlim_t want = static_cast<rlim_t>(opt.ranks) * 2 + 256;
  if (nofile.rlim_cur < want) {
    nofile.rlim_cur = std::min(nofile.rlim_max, std::max<rlim_t>(want, 4096));
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (nofile.rlim_cur < static_cast<rlim_t>(opt.ranks) + 64) {
    std::fprintf(stderr, "bench_coord_load: the open-file limit is %llu; %d ranks need more\n",
                 static_cast<unsigned long long>(nofile.rlim_cur), opt.ranks);
    return 2;
  }

  char tmpl[] = "/tmp/joulepipe-coord-load-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "bench_coord_load: mkdtemp: %s\n", std::strerror(errno));
    return 2;
  }
  const std::string tmpdir = tmpl;
  ServerLog log;
  log.Open(tmpdir + "/server.log");

  // Watchdog: a broken server must not hang the bench.
  std::mutex watchdog_mu;
  std::condition_variable watchdog_cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(watchdog_mu);
    if (watchdog_cv.wait_for(lock, std::chrono::duration<double>(opt.watchdog_s),
                             [&] { return finished; })) {
      return;
    }
    std::fprintf(stderr,
                 "bench_coord_load: watchdog: not finished after %.0f s (phase %d); "
                 "killing the server. Its last lines:\n",
                 opt.watchdog_s, g_phase.load());
    for (const std::string& l : log.Tail()) std::fprintf(stderr, "  | %s\n", l.c_str());
    const pid_t pid = g_server_pid.load();
    if (pid > 0) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
    std::fflush(stderr);
    _exit(2);
  });
  auto finish = [&](int code) {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu);
      finished = true;
    }
    watchdog_cv.notify_all();
    watchdog.join();
    log.Close();
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
    return code;
  };

  ServerProcess server;
  std::string error;
  if (!StartServer(opt.server, opt.in_memory ? "" : tmpdir + "/state.sqlite", opt.serve_args,
                   &server, &log, &error)) {
    std::fprintf(stderr, "bench_coord_load: starting %s serve: %s. Its output:\n",
                 opt.server.c_str(), error.c_str());
    for (const std::string& l : log.Tail()) std::fprintf(stderr, "  | %s\n", l.c_str());
    double ignored;
    StopServer(&server, &ignored);
    return finish(2);
  }
  const int port = server.port;
  std::printf(
      "bench_coord_load: %d ranks (pp %d x dp %d x tp %d), %d iterations, %s, %s; "
      "server %s (pid %d, port %d)\n",
      opt.ranks, kPp, dp, kTp, opt.iterations,
      opt.keep_alive ? "keep-alive connections" : "a connection per request",
      opt.in_memory ? "state in memory" : "state in SQLite", opt.server.c_str(),
      static_cast<int>(server.pid), port);
  if (straggler >= 0) {
    std::printf(
        "  straggler: pipeline %d x%.1f in iterations %lld..%lld; requests spread over "
        "0..%d ms\n",
        straggler, kSlowdown, static_cast<long long>(slow_begin),
        static_cast<long long>(slow_end - 1), opt.spread_ms);
  }
  std::fflush(stdout);

  // /proc sampler (50 ms).
  std::atomic<bool> stop_monitors{false};
  ProcPeaks peaks;
  std::thread sampler([&] {
    const std::string path = "/proc/" + std::to_string(server.pid) + "/status";
    while (!stop_monitors.load()) {
      const ProcStatus s = ReadProcStatus(path);
      const ProcStatus self = ReadProcStatus("/proc/self/status");
      const int phase = g_phase.load();
      if (s.threads > 0) {
        ++peaks.samples;
        peaks.hwm_kb = std::max(peaks.hwm_kb, s.hwm_kb);
        peaks.rss_kb = std::max(peaks.rss_kb, s.rss_kb);
        peaks.threads = std::max(peaks.threads, s.threads);
        if (phase == kRanks || phase == kAwaiting) {
          peaks.threads_awaiting = std::max(peaks.threads_awaiting, s.threads);
          peaks.hwm_kb_awaiting = std::max(peaks.hwm_kb_awaiting, s.hwm_kb);
        }
        if (phase == kIterations) {
          peaks.threads_iterations = std::max(peaks.threads_iterations, s.threads);
        }
      }
      peaks.client_threads = std::max(peaks.client_threads, self.threads);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  Recorder setup_rec;
  bool ok = true;
  {
    HttpClient http(port, opt.keep_alive);
    const json job = {{"job_id", "load"},
                      {"pp_degree", kPp},
                      {"dp_degree", dp},
                      {"tp_degree", kTp},
                      {"world_size", opt.ranks},
                      {"schedule", "1f1b"},
                      {"microbatches", kMicrobatches},
                      {"p_block_w", kPBlockW}};
    HttpResponse r = setup_rec.Timed(kCreateJob, http, "POST", "/jobs", job.dump(),
                                     "application/json", kRequestTimeoutS);
    ok = r.status == 200;
    if (ok) {
      r = setup_rec.Timed(kUploadProfile, http, "PUT", "/jobs/load/profile", csv, "text/csv",
                          kRequestTimeoutS);
      ok = r.status == 200;
    }
    if (!ok) std::fprintf(stderr, "bench_coord_load: %s\n", setup_rec.first_failure.c_str());
  }

  // Monitors: job status every 100 ms, /metrics every 500 ms.
  Recorder status_rec, metrics_rec;
  int max_waiting = 0;
  std::thread status_monitor, metrics_monitor;
  if (ok) {
    status_monitor = std::thread([&] {
      HttpClient http(port, opt.keep_alive);
      while (!stop_monitors.load()) {
        const HttpResponse r =
            status_rec.Timed(kJobStatus, http, "GET", "/jobs/load", "", nullptr, kRequestTimeoutS);
        if (r.status == 200) {
          const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
          if (j.is_object() && j.contains("waiting_requests") &&
              j.at("waiting_requests").is_number_integer()) {
            max_waiting = std::max(max_waiting, j.at("waiting_requests").get<int>());
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    metrics_monitor = std::thread([&] {
      HttpClient http(port, opt.keep_alive);
      while (!stop_monitors.load()) {
        metrics_rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr, kRequestTimeoutS);
        for (int k = 0; k < 10 && !stop_monitors.load(); ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }

  // The ranks: one event loop over libcurl's multi interface drives every
  // rank (a state machine each), so the bench costs a socket per rank, not
  // a thread, and measures the server rather than its own scheduling.
  std::vector<RankResult> results(opt.ranks);
  std::string first_error;
  int registered = 0, planned = 0;
  double ranks_started_s = 0, plans_done_s = 0, iterations_done_s = 0;
  CpuMark cpu_ranks, cpu_plans, cpu_iterations;
  LoopFigures loop;
  if (ok) {
    g_phase = kRanks;
    ranks_started_s = Now();
    cpu_ranks = ReadCpu(server.pid);
    RankLoop ranks(port, opt, straggler, slow_begin, slow_end, &results);
    ranks.on_registered = [&] {
      if (++registered == opt.ranks) g_phase = kAwaiting;
    };
    ranks.on_all_planned = [&] {
      planned = opt.ranks;
      plans_done_s = Now();
      cpu_plans = ReadCpu(server.pid);
      g_phase = kIterations;
    };
    ranks.Run(&first_error);
    loop = ranks.figures();
    iterations_done_s = Now();
    cpu_iterations = ReadCpu(server.pid);
    if (plans_done_s == 0) plans_done_s = iterations_done_s;
  }
  g_phase = kDone;

  // The job's final state and one last scrape, then stop the monitors.
  json final_status;
  std::string metrics_text;
  {
    HttpClient http(port, opt.keep_alive);
    Recorder rec;
    HttpResponse r =
        rec.Timed(kJobStatus, http, "GET", "/jobs/load", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) final_status = json::parse(r.body, nullptr, false);
    r = rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) metrics_text = r.body;
  }
  stop_monitors = true;
  if (status_monitor.joinable()) status_monitor.join();
  if (metrics_monitor.joinable()) metrics_monitor.join();
  sampler.join();
  double stop_s = 0;
  const std::string stopped = StopServer(&server, &stop_s);

  // ---- Figures ---------------------------------------------------------------
  std::vector<Recorder::Sample> by_route[kRoutes];
  int failures[kRoutes] = {};
  auto merge = [&](const Recorder& rec) {
    for (int k = 0; k < kRoutes; ++k) {
      by_route[k].insert(by_route[k].end(), rec.samples[k].begin(), rec.samples[k].end());
      failures[k] += rec.failures[k];
    }
  };
  merge(setup_rec);
  merge(status_rec);
  merge(metrics_rec);
  int fetches = 0, not_ready = 0;
  for (const RankResult& r : results) {
    merge(r.rec);
    fetches += r.fetches;
    not_ready += r.not_ready;
  }

  std::printf("\n%-34s %8s %9s %9s %9s %9s %6s\n", "route (client side)", "count", "req/s",
              "p50 ms", "p99 ms", "max ms", "fail");
  RouteFigures fig[kRoutes];
  for (int k = 0; k < kRoutes; ++k) {
    fig[k] = Figures(by_route[k], failures[k]);
    if (fig[k].count == 0) {
      std::printf("%-34s %8d\n", kRouteNames[k], 0);
      continue;
    }
    std::printf("%-34s %8zu %9.1f %9.2f %9.2f %9.2f %6d\n", kRouteNames[k], fig[k].count,
                fig[k].rate, fig[k].p50 * 1e3, fig[k].p99 * 1e3, fig[k].max * 1e3, fig[k].failures);
  }

  // The server's own view (handling time, arrival to answer minus parking).
  const auto server_routes =
      ServerHistograms(metrics_text, "joulepipe_http_request_duration_seconds");
  if (!server_routes.empty()) {
    std::printf("\n%-34s %8s %9s %11s %11s\n", "route (server's histogram)", "count", "mean ms",
                "p50 <= ms", "p99 <= ms");
    for (const auto& [route, h] : server_routes) {
      std::printf("%-34s %8.0f %9.3f %11g %11g\n", route.c_str(), h.count,
                  h.count > 0 ? h.sum / h.count * 1e3 : 0.0, BucketQuantile(h, 0.5) * 1e3,
                  BucketQuantile(h, 0.99) * 1e3);
    }
  }

  // Plan delivery.
  double last_registration = -1;
  std::vector<double> delays;
  for (const RankResult& r : results) {
    last_registration = std::max(last_registration, r.registered_at_s);
  }
  for (const RankResult& r : results) {
    if (r.plan_at_s >= 0) delays.push_back(r.plan_at_s - last_registration);
  }
  const std::optional<double> solve_sum =
      MetricValue(metrics_text, "joulepipe_plan_solve_seconds_sum");
  const std::optional<double> solve_count =
      MetricValue(metrics_text, "joulepipe_plan_solve_seconds_count");
  const double solve_s = solve_sum.value_or(NAN);
  std::printf("\nregistration: %d ranks in %.3f s (first request to last answer)\n", registered,
              last_registration - ranks_started_s);
  if (!delays.empty()) {
    std::printf(
        "plans: %zu of %d delivered; after the last registration: p50 %.3f s, p99 %.3f s, "
        "max %.3f s; server solve %.3f s (%s solve%s)\n",
        delays.size(), opt.ranks, Percentile(delays, 0.5), Percentile(delays, 0.99),
        Percentile(delays, 1.0), solve_s,
        solve_count ? std::to_string(static_cast<int>(*solve_count)).c_str() : "?",
        solve_count && *solve_count == 1 ? "" : "s");
  }
  std::printf(
      "requests parked at once (GET /jobs/{id} waiting_requests, sampled every 100 ms): "
      "max %d\n",
      max_waiting);
  if (opt.iterations > 0 && iterations_done_s > plans_done_s) {
    const double span = iterations_done_s - plans_done_s;
    std::printf(
        "iterations: %d in %.2f s (%.1f iterations/s, %.0f reports/s); plan fetches "
        "after a version rise: %d (%d answered 204)\n",
        opt.iterations, span, opt.iterations / span, opt.iterations * opt.ranks / span, fetches,
        not_ready);
  }
  std::printf(
      "server: peak RSS (VmHWM) %.1f MiB (%.1f MiB by the time every plan was "
      "delivered); threads max %d (%d while the plans were awaited, %s during "
      "iterations); %d samples at 50 ms\n",
      peaks.hwm_kb / 1024.0, peaks.hwm_kb_awaiting / 1024.0, peaks.threads, peaks.threads_awaiting,
      peaks.threads_iterations > 0 ? std::to_string(peaks.threads_iterations).c_str()
                                   : "not sampled",
      peaks.samples);
  std::printf(
      "client (this bench): threads max %d (one event loop for %d ranks + monitors); "
      "%ld TCP connections opened by the ranks; %d plan waits told to come back "
      "(204 + Retry-After); %d requests retried; CPU %.2f s\n",
      peaks.client_threads, opt.ranks, loop.connects, loop.comebacks, loop.retries,
      loop.loop_cpu_s);
  if (iterations_done_s > plans_done_s && plans_done_s > ranks_started_s) {
    const double plan_wall = plans_done_s - ranks_started_s;
    const double it_wall = iterations_done_s - plans_done_s;
    std::printf(
        "CPU (s, user+system): registration + plans %.2f server / %.2f bench in %.2f s "
        "wall; iterations %.2f server / %.2f bench in %.2f s wall (%u cores)\n",
        cpu_plans.server_s - cpu_ranks.server_s, cpu_plans.client_s - cpu_ranks.client_s, plan_wall,
        cpu_iterations.server_s - cpu_plans.server_s, cpu_iterations.client_s - cpu_plans.client_s,
        it_wall, std::thread::hardware_concurrency());
  }
  std::printf("server stop: SIGTERM -> %s in %.3f s\n", stopped.c_str(), stop_s);

  // The job's switches.
  int switches = 0, reverts = 0;
  std::int64_t completed = -1, dropped = -1;
  int final_version = 0;
  // json::value throws on a member of another type: a wrong shape is a
  // finding, not a crash.
  try {
    if (final_status.is_object()) {
      completed = final_status.value("completed_iterations", std::int64_t{-1});
      dropped = final_status.value("dropped_iterations", std::int64_t{-1});
      final_version = final_status.value("plan_version", 0);
      if (final_status.contains("switches") && final_status["switches"].is_array()) {
        std::printf("plan versions:\n");
        for (const json& s : final_status["switches"]) {
          const int version = s.value("version", 0);
          bool any_slow = false;
          if (s.contains("slowdowns") && s["slowdowns"].is_array()) {
            for (const json& x : s["slowdowns"]) any_slow = any_slow || x.get<double>() > 1;
          }
          if (version > 1) (any_slow ? switches : reverts) += 1;
          std::printf(
              "  v%d from iteration %lld: T' %.4f s, predicted saving %.1f J/iteration: "
              "%s\n",
              version, static_cast<long long>(s.value("iteration", std::int64_t{0})),
              s.value("target_s", 0.0), s.value("predicted_saving_j", 0.0),
              s.value("reason", std::string()).c_str());
        }
      }
    }
  } catch (const json::exception& e) {
    std::printf("GET /jobs/load: an answer of an unexpected shape: %s\n", e.what());
  }
  int on_final = 0;
  for (const RankResult& r : results) on_final += r.version == final_version;
  std::printf("ranks running the final plan version %d at the end: %d of %d\n", final_version,
              on_final, opt.ranks);

  // ---- Targets ---------------------------------------------------------------
  int missed = 0;
  auto check = [&](bool pass, const std::string& what) {
    std::printf("  [%s] %s\n", pass ? "PASS" : "FAIL", what.c_str());
    missed += !pass;
  };
  std::printf("\ntargets:\n");
  if (!first_error.empty() || !ok) {
    std::printf("  error: %s\n",
                first_error.empty() ? setup_rec.first_failure.c_str() : first_error.c_str());
  }
  {
    // Ranks over the server's held waits come back when told to, at most
    // max_waiting a second: the last of them may come that much later.
    const double max_waiting = MetricValue(metrics_text, "joulepipe_plan_waits_max").value_or(0);
    const double comeback_s =
        max_waiting > 0 ? std::ceil(std::max(0.0, opt.ranks - max_waiting) / max_waiting) : 0;
    const double allowed = kPlanDeadlineS + comeback_s;
    const double max_delay = delays.empty() ? INFINITY : Percentile(delays, 1.0);
    char line[320];
    std::snprintf(line, sizeof line,
                  "every rank has its plan within %.0f s (+ %.0f s for %.0f ranks over the "
                  "%.0f held waits to come back) of the last registration plus the solve "
                  "(%zu of %d; max %.3f s - solve %.3f s = %.3f s)",
                  kPlanDeadlineS, comeback_s, std::max(0.0, opt.ranks - max_waiting), max_waiting,
                  delays.size(), opt.ranks, max_delay, solve_s, max_delay - solve_s);
    check(
        static_cast<int>(delays.size()) == opt.ranks && solve_sum && max_delay - solve_s <= allowed,
        line);
  }
  for (int k = 0; k < kRoutes; ++k) {
    if (k == kPlanWait || fig[k].count == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "p99 < %.0f ms: %s (%.2f ms)", kP99TargetS * 1e3,
                  kRouteNames[k], fig[k].p99 * 1e3);
    check(fig[k].p99 < kP99TargetS, line);
  }
  {
    int total_failures = 0;
    for (int k = 0; k < kRoutes; ++k) total_failures += failures[k];
    check(total_failures == 0 && first_error.empty(),
          "every request answered 2xx (" + std::to_string(total_failures) + " failed)");
  }
  check(completed == opt.iterations && dropped == 0,
        "every iteration completed at the server (" + std::to_string(completed) + " of " +
            std::to_string(opt.iterations) + ", " + std::to_string(dropped) + " dropped)");
  check(peaks.threads_awaiting > 0 && peaks.threads_awaiting <= kMaxServerThreadsWaiting,
        "server threads while " + std::to_string(opt.ranks) +
            " plans were awaited <= " + std::to_string(kMaxServerThreadsWaiting) + " (max " +
            std::to_string(peaks.threads_awaiting) + ")");
  if (straggler >= 0 && slow_end - slow_begin >= 4) {
    check(switches >= 1 && reverts >= 1,
          "the straggler moved the other pipelines and its recovery moved them back (" +
              std::to_string(switches) + " switch(es) with a straggler, " +
              std::to_string(reverts) + " back)");
  }
  std::printf("%s\n", missed == 0 && first_error.empty() ? "PASS" : "FAIL");
  if (!first_error.empty()) {
    std::printf("server's last lines:\n");
    for (const std::string& l : log.Tail()) std::printf("  | %s\n", l.c_str());
  }
  std::fflush(stdout);
  return finish(!first_error.empty() || !ok ? 2 : missed == 0 ? 0 : 1);
}
