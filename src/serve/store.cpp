#include "joulepipe/serve/store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/output_files.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;
using model::InputError;

// Bumped when the tables change; a newer file is refused, not guessed at.
constexpr int kSchemaVersion = 1;

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(id TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
    "  config TEXT NOT NULL, created REAL NOT NULL, last_active REAL NOT NULL,"
    "  failure TEXT NOT NULL DEFAULT '', schedule_released INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS ranks(job_id TEXT NOT NULL, rank INTEGER NOT NULL,"
    "  info TEXT NOT NULL, PRIMARY KEY(job_id, rank));"
    "CREATE TABLE IF NOT EXISTS profiles(job_id TEXT PRIMARY KEY, csv TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS frontiers(job_id TEXT PRIMARY KEY, frontier TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS switches(job_id TEXT NOT NULL, version INTEGER NOT NULL,"
    "  switch TEXT NOT NULL, PRIMARY KEY(job_id, version));";

std::string Text(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text),
                                       static_cast<std::size_t>(sqlite3_column_bytes(s, column)));
}

}  // namespace

Store::Store(const std::string& path) : path_(path) {
  persistent_ = !(path.empty() || path == ":memory:");
  const std::string target = persistent_ ? path : ":memory:";
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (persistent_) {
    // A new database is private to the user (model::kPrivateFileMode); SQLite
    // gives its journal files the database's mode. An existing one keeps its.
    // Created here, by descriptor, with its mode: through a symbolic link to
    // nowhere too, which SQLite would otherwise create 0644 (O_EXCL refuses
    // any link, so it is not used; nothing is truncated).
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, model::kPrivateFileMode);
    if (fd >= 0) ::close(fd);
  }
  const int rc = sqlite3_open_v2(target.c_str(), &db_, flags, nullptr);
  auto refuse = [&](std::string why) {
    const int code = db_ != nullptr ? (sqlite3_extended_errcode(db_) & 0xff) : SQLITE_OK;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
      why = "it is in use by another process (another joulepipe serve?)";
    } else if (code == SQLITE_NOTADB) {
      why = "it is not an SQLite database";
    }
    const std::string message =
        Format("cannot use the state database '%s': %s", path.c_str(), why.c_str());
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = nullptr;
    throw InputError("ServerOptions::db_path",
                     message + "; give ServerOptions::db_path a writable file path");
  };
  if (rc != SQLITE_OK) refuse(db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  sqlite3_busy_timeout(db_, 0);
  sqlite3_extended_result_codes(db_, 1);
  // Exclusive locking before WAL: no shared-memory index, and the first
  // write below holds the file against a second server.
  char* error = nullptr;
  const char* setup =
      "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
  if (sqlite3_exec(db_, setup, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    refuse(why);
  }
  const std::string version_sql = Format(
      "BEGIN IMMEDIATE; %s INSERT OR IGNORE INTO meta(key, value) VALUES "
      "('schema_version', '%d'); COMMIT;",
      kSchema, kSchemaVersion);
  if (sqlite3_exec(db_, version_sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    refuse(why);
  }
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &s,
                         nullptr) != SQLITE_OK) {
    refuse(sqlite3_errmsg(db_));
  }
  int version = 0;
  if (sqlite3_step(s) == SQLITE_ROW) version = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  if (version != kSchemaVersion) {
    refuse(Format("it has schema version %d but this joulepipe reads version %d", version,
                  kSchemaVersion));
  }
}

Store::~Store() {
  for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

void Store::Fail(const std::string& what) const {
  throw StoreError(Format("the state database '%s' failed %s: %s",
                          persistent_ ? path_.c_str() : ":memory:", what.c_str(),
                          sqlite3_errmsg(db_)));
}

sqlite3_stmt* Store::Prepare(const char* sql) {
  auto found = statements_.find(sql);
  if (found != statements_.end()) return found->second;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
    Fail(Format("to prepare '%s'", sql));
  }
  statements_.emplace(sql, s);
  return s;
}

void Store::Exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error != nullptr ? error : sqlite3_errmsg(db_);
    sqlite3_free(error);
    throw StoreError(Format("the state database '%s' failed '%s': %s",
                            persistent_ ? path_.c_str() : ":memory:", sql, why.c_str()));
  }
}

void Store::Run(sqlite3_stmt* s) {
  const int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    const std::string sql = sqlite3_sql(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    Fail("'" + sql + "'");
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

void Store::CheckWritable() const {
  if (!in_write_) throw StoreError("internal error: a store write outside Store::Write");
  if (fail_writes_) throw StoreError("the state database refused the write (test: fail_writes)");
}

void Store::Write(const std::function<void()>& body) {
  if (in_write_) throw StoreError("internal error: nested Store::Write");
  Exec("BEGIN IMMEDIATE");
  in_write_ = true;
  try {
    body();
    in_write_ = false;
    Exec("COMMIT");
  } catch (...) {
    in_write_ = false;
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

namespace {

void BindText(sqlite3_stmt* s, int index, const std::string& text) {
  sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

}  // namespace

void Store::InsertJob(const std::string& id, std::int64_t seq, const std::string& config,
                      double created) {
  CheckWritable();
  sqlite3_stmt* s =
      Prepare("INSERT INTO jobs(id, seq, config, created, last_active) VALUES(?1, ?2, ?3, ?4, ?4)");
  BindText(s, 1, id);
  sqlite3_bind_int64(s, 2, seq);
  BindText(s, 3, config);
  sqlite3_bind_double(s, 4, created);
  Run(s);
}

void Store::PutRank(const std::string& id, int rank, const std::string& info) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("INSERT OR REPLACE INTO ranks(job_id, rank, info) VALUES(?1, ?2, ?3)");
  BindText(s, 1, id);
  sqlite3_bind_int(s, 2, rank);
  BindText(s, 3, info);
  Run(s);
}

void Store::PutProfile(const std::string& id, const std::string& csv) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("INSERT OR REPLACE INTO profiles(job_id, csv) VALUES(?1, ?2)");
  BindText(s, 1, id);
  BindText(s, 2, csv);
  Run(s);
}

void Store::PutFrontier(const std::string& id, const std::string& frontier) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("INSERT OR REPLACE INTO frontiers(job_id, frontier) VALUES(?1, ?2)");
  BindText(s, 1, id);
  BindText(s, 2, frontier);
  Run(s);
}

void Store::PutSwitch(const std::string& id, int version, const std::string& json) {
  CheckWritable();
  sqlite3_stmt* s =
      Prepare("INSERT OR REPLACE INTO switches(job_id, version, switch) VALUES(?1, ?2, ?3)");
  BindText(s, 1, id);
  sqlite3_bind_int(s, 2, version);
  BindText(s, 3, json);
  Run(s);
}

void Store::SetFailure(const std::string& id, const std::string& failure) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("UPDATE jobs SET failure = ?2 WHERE id = ?1");
  BindText(s, 1, id);
  BindText(s, 2, failure);
  Run(s);
}

void Store::SetScheduleReleased(const std::string& id) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("UPDATE jobs SET schedule_released = 1 WHERE id = ?1");
  BindText(s, 1, id);
  Run(s);
}

void Store::SetLastActive(const std::string& id, double unix_s) {
  CheckWritable();
  sqlite3_stmt* s = Prepare("UPDATE jobs SET last_active = ?2 WHERE id = ?1");
  BindText(s, 1, id);
  sqlite3_bind_double(s, 2, unix_s);
  Run(s);
}

void Store::DeleteJob(const std::string& id) {
  CheckWritable();
  for (const char* sql :
       {"DELETE FROM switches WHERE job_id = ?1", "DELETE FROM frontiers WHERE job_id = ?1",
        "DELETE FROM profiles WHERE job_id = ?1", "DELETE FROM ranks WHERE job_id = ?1",
        "DELETE FROM jobs WHERE id = ?1"}) {
    sqlite3_stmt* s = Prepare(sql);
    BindText(s, 1, id);
    Run(s);
  }
}

StoredJob Store::ReadJob(sqlite3_stmt* s) {
  StoredJob job;
  job.id = Text(s, 0);
  job.seq = sqlite3_column_int64(s, 1);
  job.config_json = Text(s, 2);
  job.created_unix_s = sqlite3_column_double(s, 3);
  job.last_active_unix_s = sqlite3_column_double(s, 4);
  job.failure = Text(s, 5);
  job.schedule_released = sqlite3_column_int(s, 6) != 0;
  return job;
}

void Store::FillJob(StoredJob* job) {
  sqlite3_stmt* s = Prepare("SELECT rank, info FROM ranks WHERE job_id = ?1 ORDER BY rank");
  BindText(s, 1, job->id);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) job->ranks[sqlite3_column_int(s, 0)] = Text(s, 1);
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) Fail("to read ranks");

  s = Prepare("SELECT csv FROM profiles WHERE job_id = ?1");
  BindText(s, 1, job->id);
  if ((rc = sqlite3_step(s)) == SQLITE_ROW) job->profile_csv = Text(s, 0);
  sqlite3_reset(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) Fail("to read a profile");

  s = Prepare("SELECT frontier FROM frontiers WHERE job_id = ?1");
  BindText(s, 1, job->id);
  if ((rc = sqlite3_step(s)) == SQLITE_ROW) job->frontier_json = Text(s, 0);
  sqlite3_reset(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) Fail("to read a frontier");

  s = Prepare("SELECT switch FROM switches WHERE job_id = ?1 ORDER BY version");
  BindText(s, 1, job->id);
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) job->switches_json.push_back(Text(s, 0));
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) Fail("to read plan switches");
}

std::vector<StoredJob> Store::LoadAll() {
  std::vector<StoredJob> jobs;
  sqlite3_stmt* s = Prepare(
      "SELECT id, seq, config, created, last_active, failure, schedule_released FROM jobs "
      "ORDER BY seq");
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) jobs.push_back(ReadJob(s));
  sqlite3_reset(s);
  if (rc != SQLITE_DONE) Fail("to read jobs");
  for (StoredJob& job : jobs) FillJob(&job);
  return jobs;
}

std::optional<StoredJob> Store::Load(const std::string& id) {
  sqlite3_stmt* s = Prepare(
      "SELECT id, seq, config, created, last_active, failure, schedule_released FROM jobs "
      "WHERE id = ?1");
  BindText(s, 1, id);
  std::optional<StoredJob> job;
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) job = ReadJob(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) Fail("to read a job");
  if (job) FillJob(&*job);
  return job;
}

std::int64_t Store::MaxSeq() {
  sqlite3_stmt* s = Prepare("SELECT COALESCE(MAX(seq), 0) FROM jobs");
  std::int64_t seq = 0;
  if (sqlite3_step(s) == SQLITE_ROW) seq = sqlite3_column_int64(s, 0);
  sqlite3_reset(s);
  return seq;
}

}  // namespace joulepipe::serve
