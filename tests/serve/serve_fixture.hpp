// The fixture of the serve part's tests: a Server on a free loopback port
// with its log captured, and helpers to register jobs and check errors.
// Included by one test file per idea (server_test.cpp, hardening_test.cpp,
// attack_test.cpp).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http_test_client.hpp"
#include "joulepipe/serve/server.hpp"

// Not in an anonymous namespace: GoogleTest needs one ServeTest class for
// every file that uses it.
namespace joulepipe::serve {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Connect;
using testing::Encode;
using testing::Http;
using testing::HttpResponse;
using testing::ReadResponse;
using testing::SendRequest;
using testing::TinyProfileCsv;
using testing::WideProfileCsv;

inline int ThreadCount() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

// This process's resident memory (kB), from /proc/self/status; -1 if unknown.
inline long ResidentKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline bool WaitFor(const std::function<bool()>& done, double seconds) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(seconds * 1000));
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

inline json JobBody(const std::string& id, int pp, int dp, int tp = 1) {
  json j = {{"pp_degree", pp},   {"dp_degree", dp},   {"tp_degree", tp},       {"schedule", "1f1b"},
            {"microbatches", 4}, {"p_block_w", 60.0}, {"resolution_s", 0.0005}};
  if (!id.empty()) j["job_id"] = id;
  return j;
}

inline json Rank(int rank, int dp, int pp, int tp = 0) {
  return {{"rank", rank},
          {"dp_rank", dp},
          {"pp_rank", pp},
          {"tp_rank", tp},
          {"available_frequencies", {1410, 1200, 1000}}};
}

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("joulepipe-serve-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  ServerOptions Options() {
    ServerOptions o;
    o.port = 0;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.push_back(line);
    };
    return o;
  }
  void Start(ServerOptions o) { server_ = std::make_unique<Server>(std::move(o)); }
  int port() const { return server_->port(); }

  HttpResponse Get(const std::string& target, const testing::Headers& h = {}) {
    return Http(port(), "GET", target, "", h);
  }
  HttpResponse Post(const std::string& target, const json& body, const testing::Headers& h = {}) {
    return Http(port(), "POST", target, body.dump(), h);
  }
  HttpResponse PutProfile(const std::string& id, const std::string& csv) {
    return Http(port(), "PUT", "/jobs/" + Encode(id) + "/profile", csv,
                {{"Content-Type", "text/csv"}});
  }

  // Registers `id` (pp x dp) with all its ranks; rank = dp * pp_degree + pp.
  void RegisterJob(const std::string& id, int pp, int dp) {
    ASSERT_EQ(Post("/jobs", JobBody(id, pp, dp)).status, 200);
    for (int d = 0; d < dp; ++d) {
      for (int p = 0; p < pp; ++p) {
        ASSERT_EQ(Post("/jobs/" + id + "/ranks", Rank(d * pp + p, d, p)).status, 200);
      }
    }
  }

  bool Logged(const std::string& part) {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const std::string& line : log_) {
      if (line.find(part) != std::string::npos) return true;
    }
    return false;
  }

  fs::path dir_;
  std::unique_ptr<Server> server_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

inline void ExpectError(const HttpResponse& r, int status, const std::string& message_part,
                        const json& field) {
  ASSERT_EQ(r.status, status) << r.body;
  const json j = r.Json();
  EXPECT_NE(j.at("error").get<std::string>().find(message_part), std::string::npos)
      << j.at("error");
  EXPECT_EQ(j.at("field"), field) << r.body;
}

}  // namespace joulepipe::serve
