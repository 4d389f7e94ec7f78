// Store: the coordinator's state in SQLite, event-sourced as coord/job.hpp's
// "Persistence is by replay" describes. A job is its rows:
//
//   jobs       id, registration order, config (the POST /jobs JSON with every
//              member), created and last-active time (unix s), planning
//              failure, whether Zeus's schedule barrier has opened
//   ranks      one RankInfo JSON per registered rank
//   profiles   the profile CSV text the job plans with
//   frontiers  coord::Job::Solved() as SolvedPlanToJson, once planned
//   switches   protocol::PlanSwitchToJson per plan version (1: the initial plan)
//
// and a new coord::Job fed the same calls (ranks in rank order, the profile,
// RestorePlan) is in the same state. Nothing else is stored: iteration
// reports are not (the straggler detector's window refills), nor the Zeus
// per-rank iteration counters.
//
// Durability: WAL journal, synchronous=NORMAL. A committed transaction
// survives the process being killed (kill -9); the last few may be lost to
// a power failure (the OS's page cache). The database is opened in
// exclusive locking mode: a second server on the same file fails to start
// instead of corrupting the first one's state.
//
// Atomicity: every change goes through Write(), one transaction; a throw
// inside it (or a failed COMMIT) rolls the transaction back, so the file
// holds either all of a change or none of it.
//
// Threads: none inside. A Store is used by one thread at a time (the
// service holds its lock around every call).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace joulepipe::serve {

// A failure of the database itself (disk full, I/O error, a file that is
// not a joulepipe database): an HTTP 500, not the client's fault.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Everything stored about one job.
struct StoredJob {
  std::string id;
  std::int64_t seq = 0;  // registration order
  std::string config_json;
  double created_unix_s = 0;
  double last_active_unix_s = 0;
  std::string failure;  // "" unless planning failed
  bool schedule_released = false;
  std::map<int, std::string> ranks;  // rank -> RankInfo JSON
  std::optional<std::string> profile_csv;
  std::optional<std::string> frontier_json;
  std::vector<std::string> switches_json;  // by version, from 1
};

class Store {
 public:
  // `path` "" or ":memory:": an in-memory database (nothing persists).
  // Creates the schema in a new file. Throws model::InputError naming
  // "ServerOptions::db_path" when the file cannot be opened or created, is
  // not a joulepipe state database (or one of a newer schema), or is in use
  // by another process.
  explicit Store(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  bool persistent() const { return persistent_; }
  const std::string& path() const { return path_; }

  // Runs `body` (calls of the writers below) as one transaction. Throws
  // StoreError when SQLite fails (rolled back), and rethrows what `body`
  // throws (rolled back too).
  void Write(const std::function<void()>& body);

  // Writers; call them inside Write. Each throws StoreError on failure.
  void InsertJob(const std::string& id, std::int64_t seq, const std::string& config_json,
                 double created_unix_s);
  void PutRank(const std::string& id, int rank, const std::string& info_json);
  void PutProfile(const std::string& id, const std::string& csv);
  void PutFrontier(const std::string& id, const std::string& frontier_json);
  void PutSwitch(const std::string& id, int version, const std::string& switch_json);
  void SetFailure(const std::string& id, const std::string& failure);  // "" clears it
  void SetScheduleReleased(const std::string& id);
  void SetLastActive(const std::string& id, double unix_s);
  void DeleteJob(const std::string& id);  // every row of the job

  // Readers (no transaction needed). Jobs in registration order.
  std::vector<StoredJob> LoadAll();
  std::optional<StoredJob> Load(const std::string& id);
  std::int64_t MaxSeq();

  // For tests of the all-or-nothing rule: while set, every writer throws
  // StoreError as a full disk would.
  void set_fail_writes(bool fail) { fail_writes_ = fail; }

 private:
  sqlite3_stmt* Prepare(const char* sql);
  void Exec(const char* sql);
  void Run(sqlite3_stmt* statement);  // steps to completion, then resets
  void CheckWritable() const;
  [[noreturn]] void Fail(const std::string& what) const;
  StoredJob ReadJob(sqlite3_stmt* row);
  void FillJob(StoredJob* job);

  std::string path_;
  bool persistent_ = false;
  bool fail_writes_ = false;
  bool in_write_ = false;
  sqlite3* db_ = nullptr;
  std::map<const char*, sqlite3_stmt*> statements_;  // by SQL text (literals)
};

}  // namespace joulepipe::serve
