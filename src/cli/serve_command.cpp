// `joulepipe serve`: the coordinator in the foreground until a stop signal.
#include "serve_command.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "flag_names.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/read_file.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/serve/server.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

using model::InputError;

struct ServeFlags {
  std::string host = "127.0.0.1";
  int port = 8470;
  std::string db;
  std::string token_file;
  double evict_after_s = 7 * 86400;
  int max_connections = 4096;
  int max_waiting = -1;                // -1: max_connections / 4, at most 1024
  int keep_alive_connections = -1;     // -1: max_connections / 2
  int max_connections_per_client = 0;  // 0: max_connections
  int max_jobs = 1024;
  int planners = 2;
  double plan_time_limit_s = 600;
  double light_solve_budget_s = 3;
  std::string profile;
  std::string schedule = "1f1b";
  int microbatches = 0;
  int chunks = 2;
  double p_block_w = 0;
  CLI::Option* schedule_option = nullptr;
  CLI::Option* microbatches_option = nullptr;
  CLI::Option* chunks_option = nullptr;
  CLI::Option* p_block_option = nullptr;
  CLI::Option* profile_option = nullptr;
};

namespace {

constexpr char kServeFooter[] =
    "\nServes the coordination policy over HTTP+JSON: jobs register, ranks register and\n"
    "long-poll for their plan (a waiting rank holds no thread), a profile is uploaded,\n"
    "the frontier is solved once per job, and iteration reports drive straggler plan\n"
    "switches. State (jobs, ranks, profiles, frontiers, plan switches) is in --db and\n"
    "survives kill -9; without --db it is in memory. Zeus 0.16.0's PFO client works\n"
    "unchanged (POST /register_job, /register_rank, GET /schedule, POST /result).\n"
    "\n"
    "Example (a 2-stage, 2-pipeline job):\n"
    "  joulepipe serve --db state.sqlite &\n"
    "  curl -s localhost:8470/jobs -d '{\"job_id\":\"demo\",\"pp_degree\":2,\"dp_degree\":2,\n"
    "       \"tp_degree\":1,\"schedule\":\"1f1b\",\"microbatches\":8,\"p_block_w\":70}'\n"
    "  curl -s localhost:8470/jobs/demo/ranks -d '{\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\n"
    "       \"tp_rank\":0,\"available_frequencies\":[1410,1200]}'     # ... ranks 1-3\n"
    "  curl -s -X PUT localhost:8470/jobs/demo/profile -H 'Content-Type: text/csv' \\\n"
    "       --data-binary @prof.csv                                  # 2-stage profile\n"
    "  curl -s 'localhost:8470/jobs/demo/plan?rank=0&wait_s=60'     # waits for the plan\n"
    "  curl -s localhost:8470/jobs/demo/iterations \\\n"
    "       -d '{\"rank\":0,\"iteration\":0,\"time_s\":1.9}'\n"
    "  curl -s localhost:8470/jobs/demo; curl -s localhost:8470/metrics\n"
    "With --token-file F, send -H \"Authorization: Bearer $(cat F)\" (only /healthz is\n"
    "open). Listening on a non-loopback --host without a token is warned about.\n"
    "\n"
    "Zeus jobs: Zeus's JobInfo has only the parallel degrees, so give their schedule:\n"
    "  joulepipe serve --profile prof.csv --microbatches 24 [--schedule 1f1b] [--p-block W]\n"
    "attaches the profile to every Zeus job at registration (its stages must equal the\n"
    "job's pp_degree); with --microbatches but no --profile, upload one per job with\n"
    "PUT /jobs/{id}/profile while the ranks wait in GET /schedule.\n"
    "\n"
    "docs/coordination.md describes every route; docs/openapi.yaml has their shapes.";

// The token: the file's text without surrounding whitespace.
std::string ReadToken(const std::string& path) {
  // The shared bounded reader: at most 4 KiB (a token is one line), checked
  // before the file is read whole, so --token-file /dev/zero ends.
  std::string token = model::ReadWholeFile(path, "--token-file", 4096);
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!token.empty() && space(token.back())) token.pop_back();
  std::size_t begin = 0;
  while (begin < token.size() && space(token[begin])) ++begin;
  token = token.substr(begin);
  if (token.empty()) throw InputError("--token-file '" + path + "' is empty; put the token in it");
  for (unsigned char c : token) {
    if (c <= ' ' || c >= 127) {
      throw InputError("--token-file '" + path +
                       "' holds whitespace or a non-ASCII byte inside the token; a token is "
                       "printable ASCII on one line");
    }
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    std::fprintf(stderr,
                 "joulepipe serve: warning: --token-file '%s' is readable by other users (mode "
                 "%04o); chmod 600 it\n",
                 path.c_str(), static_cast<unsigned>(st.st_mode & 07777));
  }
  return token;
}

void PrintLine(const std::string& line) {
  const std::string text = model::IsoUtcNow() + " " + WithFlagNames(line) + "\n";
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

int RunServe(const ServeFlags& f) {
  serve::ServerOptions options;
  options.host = f.host;
  options.port = f.port;
  options.db_path = f.db;
  if (!f.token_file.empty()) options.token = ReadToken(f.token_file);
  if (!(f.evict_after_s >= 0)) {
    throw InputError(
        Printf("--evict-after must be >= 0 seconds, 0 for never (got %g)", f.evict_after_s));
  }
  options.evict_after_s = f.evict_after_s;
  options.max_connections = f.max_connections;
  options.max_waiting =
      f.max_waiting >= 0 ? f.max_waiting : std::clamp(f.max_connections / 4, 1, 1024);
  options.keep_alive_connections =
      f.keep_alive_connections >= 0 ? f.keep_alive_connections : f.max_connections / 2;
  options.max_connections_per_client = f.max_connections_per_client;
  options.max_jobs = f.max_jobs;
  options.planners = f.planners;
  options.plan_time_limit_s = f.plan_time_limit_s;
  options.light_solve_budget_s = f.light_solve_budget_s;

  const bool zeus_flags = f.schedule_option->count() > 0 || f.chunks_option->count() > 0 ||
                          f.p_block_option->count() > 0 || f.profile_option->count() > 0;
  if (zeus_flags && f.microbatches_option->count() == 0) {
    throw InputError(
        "--profile, --schedule, --chunks and --p-block set the schedule of Zeus-registered jobs "
        "and need --microbatches too (microbatches per iteration); give it, or leave them out "
        "and register jobs with POST /jobs");
  }
  if (f.microbatches_option->count() > 0) {
    if (f.microbatches < 1) {
      throw InputError(Printf("--microbatches must be >= 1 (got %d)", f.microbatches));
    }
    const schedule::Spec spec =
        ScheduleFromFlags(f.schedule, 1, f.microbatches, f.chunks, f.chunks_option->count() > 0);
    options.zeus.kind = spec.kind;
    options.zeus.microbatches = spec.microbatches;
    options.zeus.chunks = spec.chunks;
    options.zeus.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
    if (!f.profile.empty()) {
      options.zeus.profile = model::ReadProfileCsv(f.profile);
      options.zeus.profile_name = f.profile;
    }
  }
  options.log = PrintLine;

  // Taken before the server's threads start, so that they inherit the mask.
  TakenSignals signals;
  serve::Server server(std::move(options));
  std::string db = server.persistent()
                       ? "db " + f.db
                       : std::string(
                             "db in memory, nothing persists: give --db FILE to keep "
                             "state");
  std::printf("joulepipe serve: listening on %s (%s, %d jobs restored)\n", server.url().c_str(),
              db.c_str(), server.restored_jobs());
  if (f.microbatches_option->count() > 0) {
    const std::string profile = f.profile.empty()
                                    ? "; upload a profile per job (PUT /jobs/{id}/profile)"
                                    : " and the profile " + f.profile;
    std::printf("joulepipe serve: Zeus jobs plan with %s, %d microbatches%s\n", f.schedule.c_str(),
                f.microbatches, profile.c_str());
  } else {
    std::printf(
        "joulepipe serve: Zeus registration (POST /register_job) is off: give "
        "--microbatches (and --profile) to plan Zeus jobs\n");
  }
  std::fflush(stdout);

  int sig = 0;
  while ((sig = signals.Wait(-1)) == 0) {
  }
  PrintLine("stopping (" + SignalName(sig) + ")");
  server.Stop();
  const std::string where = server.persistent() ? "; the state is in " + f.db : "";
  std::printf("joulepipe serve: stopped%s\n", where.c_str());
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

ServeSubcommand::ServeSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "serve", "Serve coordination (plans for every rank, straggler switching) over HTTP")),
      flags_(std::make_unique<ServeFlags>()) {
  ServeFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer(kServeFooter);
  c->add_option("--host", f->host, "Address to listen on (0.0.0.0 or :: for all)")
      ->capture_default_str()
      ->type_name("ADDR");
  c->add_option("--port", f->port, "TCP port; 0 picks a free one (printed)")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--db", f->db, "SQLite state file (created if missing; default: in memory)")
      ->type_name("FILE");
  c->add_option("--token-file", f->token_file, "File holding the bearer token clients must send")
      ->type_name("FILE");
  c->add_option("--evict-after", f->evict_after_s,
                "Delete jobs idle this many seconds (0 = never; default 7 days)")
      ->type_name("S");
  c->add_option("--max-connections", f->max_connections,
                "Open connections at most, waiting ranks included")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--max-waiting", f->max_waiting,
                "Plan long polls held at once; further ones are told when to come back "
                "(Retry-After) and wait without a connection (default: --max-connections / 4, "
                "at most 1024)")
      ->type_name("N");
  c->add_option("--keep-alive-connections", f->keep_alive_connections,
                "Above this many open connections every answer closes its connection, so "
                "ranks between iterations hold none (default: --max-connections / 2)")
      ->type_name("N");
  c->add_option("--max-connections-per-client", f->max_connections_per_client,
                "Connections from one address that have not sent a request yet, at most: a "
                "further one closes that address's longest-silent one (after a 1 s grace); a "
                "new connection is never refused for its address, and clients that spoke never "
                "count (default: --max-connections). Whatever a client sends, a request's "
                "headers must arrive within 120 s and, when the server runs short of room, "
                "silent connections past their grace are closed first, then the longest idle")
      ->type_name("N");
  c->add_option("--max-jobs", f->max_jobs,
                "Jobs held at once; registering one more is answered 503 until one is deleted "
                "or evicted")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--planners", f->planners,
                "Threads solving frontiers, 1..64; one stays free for light jobs (lightest "
                "planned first)")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--plan-time-limit", f->plan_time_limit_s,
                "Seconds one job's plan solve may take; then the job fails with advice")
      ->capture_default_str()
      ->type_name("S");
  c->add_option("--light-solve-budget", f->light_solve_budget_s,
                "Seconds a job rated light may solve while another job waits; then it yields "
                "and is queued again as heavy (bounds how long a wrong estimate delays others)")
      ->capture_default_str()
      ->type_name("S");
  f->profile_option =
      c->add_option("--profile", f->profile, "Zeus jobs: stage profile CSV attached to each")
          ->type_name("FILE");
  f->schedule_option =
      c->add_option("--schedule", f->schedule, "Zeus jobs: gpipe, 1f1b or interleaved")
          ->capture_default_str()
          ->type_name("S");
  f->microbatches_option =
      c->add_option("--microbatches", f->microbatches, "Zeus jobs: microbatches per iteration M")
          ->type_name("M");
  f->chunks_option =
      c->add_option("--chunks", f->chunks, "Zeus jobs: model chunks per stage (interleaved only)")
          ->type_name("V");
  f->p_block_option = c->add_option("--p-block", f->p_block_w,
                                    "Zeus jobs: GPU power while blocked, W (default: the "
                                    "profile's p_block_w)")
                          ->type_name("W");
}

ServeSubcommand::~ServeSubcommand() = default;

int ServeSubcommand::Run() const {
  return RunServe(*flags_);
}

}  // namespace joulepipe::cli
