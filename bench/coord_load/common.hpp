// bench_coord_load's shared ground: the job it runs (8 stages x 4-way TP, a
// straggler pipeline), its targets and timeouts, and the run's clock.
// Included by bench/coord_load.cpp only (one translation unit).
#pragma once

#include <arpa/inet.h>
#include <curl/curl.h>
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
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "../bench_stats.hpp"
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

}  // namespace
