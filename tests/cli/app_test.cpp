// The command as a whole: demo, help, version, usage errors; and the plan
// thinning (SelectPoints) as a unit.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/plan_command.hpp"
#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;

class AppTest : public ScratchDirTest {
 protected:
  AppTest() : ScratchDirTest("app") {}
};

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST_F(AppTest, DemoSimulatesTheEmbeddedJobAndWritesTheFrontier) {
  const fs::path out = root_ / "demo-out";
  const Result r = Run("demo --out " + Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"Perseus SOSP'24", "1,024 A100-SXM", "healthy", "straggler 1.2x", "MWh saved",
        "simulated from the measured profile (not measured here)", "frontier.svg",
        // The projection says whose MWh they are (issue 44: they read as
        // GPT-3 175B's, which `site` puts at about a third more).
        "Projected full run of the measured slice", "not a real run's",
        "joulepipe site --model gpt3-175b --gpu a100-sxm --gpus 1024"}) {
    EXPECT_TRUE(Contains(r.out, needle)) << needle << "\n" << r.out;
  }
  // What the grid sees (issue 45): the job's swing and ramp, both policies;
  // joulepipe's lower clocks swing and ramp less.
  double swing[2] = {0, 0}, ramp[2] = {0, 0};
  int policies = 0;
  for (const char* policy : {"  baseline   swing ", "  joulepipe  swing "}) {
    const std::size_t at = r.out.find(policy);
    ASSERT_NE(at, std::string::npos) << policy << "\n" << r.out;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at + std::string(policy).size(),
                          "%lf MW within 1 s, ramp %lf MW/s", &swing[policies], &ramp[policies]),
              2);
    ++policies;
  }
  EXPECT_GT(swing[0], 0.1);
  EXPECT_LT(swing[1], swing[0]);
  EXPECT_LT(ramp[1], ramp[0]);
  for (const char* name : {"report.html", "frontier.svg", "simulation.json", "intrinsic_plan.json",
                           "straggler_plan.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out / name)) << name;
  }
  // The report of the same job: the intrinsic plan, the straggler response.
  const std::string html = Slurp(out / "report.html");
  EXPECT_TRUE(Contains(html, "the intrinsic plan saves 13.70% GPU energy")) << html.substr(0, 600);
  EXPECT_TRUE(Contains(html, "straggler response"));
  EXPECT_FALSE(Contains(html, "<script"));
  // What users rely on: less energy, never a longer iteration.
  const nlohmann::json sim = nlohmann::json::parse(Slurp(out / "simulation.json"));
  const double t_base = sim["baseline"]["time_s"], t_jp = sim["joulepipe"]["time_s"];
  EXPECT_LE(t_jp, t_base * (1 + 1e-9));
  EXPECT_GT(sim["saving_pct"].get<double>(), 10.0);
  EXPECT_LT(sim["joulepipe"]["energy_j"].get<double>(), sim["baseline"]["energy_j"].get<double>());
  const std::string svg = Slurp(out / "frontier.svg");
  EXPECT_TRUE(Contains(svg, "intrinsic plan: ")) << svg.substr(0, 400);
  EXPECT_TRUE(Contains(svg, "straggler plan"));

  // The plans are real plans: `evaluate` replays them on the same profile.
  const Result replay = Run(
      "evaluate --json --p-block 83.64 --profile " +
      Quote(fs::path(JOULEPIPE_SOURCE_DIR) / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv") +
      " --plan " + Quote(out / "intrinsic_plan.json"));
  ASSERT_EQ(replay.code, 0) << replay.err;
}

// `simulate --grid`: the job's power as the grid sees it. With a 0.5 s
// all-reduce every GPU waits at P_block at each iteration's end, so the
// trough is the job's P_block power; the waveform's integral is the run's
// energy; the CSV holds both policies' bins.
TEST_F(AppTest, SimulateGridPrintsWhatTheGridSees) {
  const std::string job =
      "simulate --profile " +
      Quote(fs::path(JOULEPIPE_SOURCE_DIR) / "data" / "profiles" / "gpt3-175b+a40_bf16.csv") +
      " --p-block 70.38 --pipelines 4 --stages 8 --microbatches 24 --allreduce-ms 500 "
      "--iterations 4 --straggler-slowdown 1.1 --straggler-from 2 --grid";
  const fs::path csv = root_ / "wave.csv";
  const Result r = Run(job + " --json --waveform-csv " + Quote(csv));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  const nlohmann::json& grid = out["grid"];
  EXPECT_EQ(grid["bin_s"].get<double>(), 0.01);
  const double blocked = 70.38 * 4 * 8;
  for (const char* policy : {"baseline", "joulepipe"}) {
    SCOPED_TRACE(policy);
    const nlohmann::json& m = grid[policy];
    EXPECT_NEAR(m["trough_w"].get<double>(), blocked, 1e-6);
    EXPECT_GT(m["swing_w"].get<double>(), 0.5 * (m["peak_w"].get<double>() - blocked));
    EXPECT_GT(m["ramp_w_per_s"].get<double>(), 0);
    EXPECT_NEAR(m["energy_j"].get<double>(), 4 * out[policy]["energy_j"].get<double>(),
                1e-6 * m["energy_j"].get<double>());
  }
  EXPECT_LT(grid["joulepipe"]["peak_w"].get<double>(), grid["baseline"]["peak_w"].get<double>());
  const std::string wave = Slurp(csv);
  EXPECT_EQ(wave.rfind("time_s,baseline_gpu_w,joulepipe_gpu_w\n", 0), 0u) << wave.substr(0, 80);
  EXPECT_GT(std::count(wave.begin(), wave.end(), '\n'), 1000);

  const Result text = Run(job + " --host-power 150");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "the job's GPU + host power in 10 ms bins")) << text.out;
  EXPECT_TRUE(Contains(text.out, "  joulepipe ")) << text.out;
  const Result bad = Run(job + " --waveform-ms 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "--waveform-ms must be 0.1..10000 ms")) << bad.err;
  const Result band = Run(job + " --band-hi-hz 80");
  EXPECT_EQ(band.code, 2);
  EXPECT_TRUE(Contains(band.err, "<= 50 Hz")) << band.err;
}

// A grid plan: a ramp limit a third of the baseline's is met by the firmware
// floor alone at an energy cost, and by joulepipe's plan + floor for less;
// the energy-smoothness frontier never gets cheaper as the limit tightens.
TEST_F(AppTest, SimulateGridPlanMeetsARampLimitForLessEnergyThanTheFirmwareFloor) {
  const std::string job =
      "simulate --profile " +
      Quote(fs::path(JOULEPIPE_SOURCE_DIR) / "data" / "profiles" / "gpt3-175b+a40_bf16.csv") +
      " --p-block 70.38 --pipelines 4 --stages 8 --microbatches 24 --allreduce-ms 500 "
      "--iterations 2 --max-slowdown 1.05";
  const Result free = Run(job + " --grid --json");
  ASSERT_EQ(free.code, 0) << free.err;
  const double base_ramp =
      nlohmann::json::parse(free.out)["grid"]["baseline"]["ramp_w_per_s"].get<double>();
  const double limit_mw = base_ramp / 3 / 1e6;
  const Result r =
      Run(job + " --json --grid-frontier --max-ramp-mw-per-s " + std::to_string(limit_mw));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out)["grid_plan"];
  EXPECT_FALSE(plan["baseline"]["meets"].get<bool>());
  EXPECT_TRUE(plan["firmware"]["meets"].get<bool>());
  EXPECT_TRUE(plan["chosen"]["meets"].get<bool>());
  EXPECT_GT(plan["firmware"]["floor_w"].get<double>(), 0);
  EXPECT_GT(plan["firmware"]["energy_j"].get<double>(), plan["baseline"]["energy_j"].get<double>());
  EXPECT_LT(plan["chosen"]["energy_j"].get<double>(), plan["firmware"]["energy_j"].get<double>());
  EXPECT_LE(plan["chosen"]["grid"]["ramp_w_per_s"].get<double>(), limit_mw * 1e6 * (1 + 1e-6));
  const nlohmann::json& sweep = plan["ramp_frontier"];
  ASSERT_EQ(sweep.size(), 6u);
  for (std::size_t k = 1; k < sweep.size(); ++k) {
    EXPECT_GE(sweep[k]["chosen"]["energy_j"].get<double>(),
              sweep[k - 1]["chosen"]["energy_j"].get<double>() * (1 - 1e-9));
    EXPECT_LE(sweep[k]["chosen"]["energy_j"].get<double>(),
              sweep[k]["firmware"]["energy_j"].get<double>());
  }
  const Result text = Run(job + " --max-ramp-mw-per-s " + std::to_string(limit_mw));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "firmware: baseline + floor")) << text.out;
  EXPECT_TRUE(Contains(text.out, "energy burnt by the floor")) << text.out;
  const Result bad = Run(job + " --min-power-fraction 1.5");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "--min-power-fraction must be 0..1")) << bad.err;
}

// --grid-plan-out: the runtime's plan for a limit met without a floor:
// the least-energy such plan, its waits held at each stage's highest clock,
// and a start ramp sized for the ramp limit (ascending caps ending at the
// highest clock). A file is never replaced without --force, a limit is
// needed, and a limit only a floor meets is refused naming what it takes.
TEST_F(AppTest, SimulateGridPlanOutWritesTheRuntimesShapedPlan) {
  const std::string job =
      "simulate --profile " +
      Quote(fs::path(JOULEPIPE_SOURCE_DIR) / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv") +
      " --p-block 83.64 --pipelines 16 --stages 8 --microbatches 96 --tp 8 --allreduce-ms 850 "
      "--iterations 2";
  const fs::path out = root_ / "shaped.json";
  const Result r = Run(job + " --max-ramp-mw-per-s 1 --grid-plan-out " + Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "runtime plan " + out.string() + ": plan 15.679 s, -13.6% energy"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "the stop: the same caps descending over the job's last 0.3 s"))
      << r.out;
  const nlohmann::json plan = nlohmann::json::parse(Slurp(out));
  ASSERT_TRUE(plan.contains("grid")) << plan.dump();
  EXPECT_EQ(plan["grid"]["hold_frequency"],
            nlohmann::json::array({1410, 1410, 1410, 1410, 1410, 1410, 1410, 1410}));
  const std::vector<int> ramp = plan["grid"]["start_ramp_frequencies"].get<std::vector<int>>();
  ASSERT_GE(ramp.size(), 2u);
  EXPECT_TRUE(std::is_sorted(ramp.begin(), ramp.end()));
  EXPECT_EQ(ramp.back(), 1410);
  EXPECT_NEAR(plan["grid"]["start_ramp_s"].get<double>(), 0.1 * static_cast<double>(ramp.size()),
              1e-9);
  EXPECT_EQ(plan["grid"]["stop_ramp_s"], plan["grid"]["start_ramp_s"]);
  EXPECT_NEAR(plan["predicted"]["time_s"].get<double>(), 15.679, 1e-3);
  // It is a plan every command reads: evaluate replays it.
  const Result evaluated = Run(
      "evaluate --profile " +
      Quote(fs::path(JOULEPIPE_SOURCE_DIR) / "data" / "profiles" / "gpt3-175b+a100_sxm_bf16.csv") +
      " --p-block 83.64 --plan " + Quote(out));
  EXPECT_EQ(evaluated.code, 0) << evaluated.err;

  const Result again = Run(job + " --max-ramp-mw-per-s 1 --grid-plan-out " + Quote(out));
  EXPECT_EQ(again.code, 2);
  EXPECT_TRUE(Contains(again.err, "exists; pass --force to replace it")) << again.err;
  EXPECT_EQ(
      Run(job + " --max-ramp-mw-per-s 1 --start-ramp-s 2 --force --grid-plan-out " + Quote(out))
          .code,
      0);
  EXPECT_EQ(nlohmann::json::parse(Slurp(out))["grid"]["start_ramp_s"].get<double>(), 2.0);
  // With --grid-offsets and room for them the plan may carry an offset.
  const fs::path offset = root_ / "offset.json";
  const Result with_offsets = Run(job + " --max-slowdown 1.05 --grid-offsets --max-ramp-mw-per-s " +
                                  "0.5 --grid-plan-out " + Quote(offset));
  ASSERT_EQ(with_offsets.code, 0) << with_offsets.err;
  EXPECT_GT(nlohmann::json::parse(Slurp(offset))["grid"].value("pipeline_offset_s", 0.0), 0)
      << with_offsets.out;
  const Result no_limit = Run(job + " --grid-plan-out " + Quote(root_ / "x.json"));
  EXPECT_EQ(no_limit.code, 2);
  EXPECT_TRUE(Contains(no_limit.err, "--grid-plan-out writes the plan for a grid limit"))
      << no_limit.err;
  const Result floor =
      Run(job + " --max-ramp-mw-per-s 0.1 --grid-plan-out " + Quote(root_ / "y.json"));
  EXPECT_EQ(floor.code, 2);
  EXPECT_TRUE(Contains(floor.err, "without a floor; it takes a power floor")) << floor.err;
  EXPECT_FALSE(fs::exists(root_ / "y.json"));
}

TEST_F(AppTest, DemoWithNoFilesWritesNothing) {
  const fs::path out = root_ / "never";
  const Result r = Run("demo --no-files --out " + Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(Contains(r.out, "Wrote "));
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(AppTest, HelpTeachesFormatsAndExamples) {
  const Result top = Run("--help");
  EXPECT_EQ(top.code, 0);
  for (const char* needle : {"demo", "plan", "evaluate", "stage,instruction,frequency,time,energy",
                             "joulepipe plan --profile", "Exit codes"}) {
    EXPECT_TRUE(Contains(top.out, needle)) << needle;
  }
  const Result plan = Run("plan --help");
  EXPECT_EQ(plan.code, 0);
  for (const char* needle : {"--p-block", "--max-plans", "frontier.csv", "chosen.py", "Example"}) {
    EXPECT_TRUE(Contains(plan.out, needle)) << needle;
  }
  const Result evaluate = Run("evaluate --help");
  EXPECT_EQ(evaluate.code, 0);
  EXPECT_TRUE(Contains(evaluate.out, "\"num_microbatches\""));
  EXPECT_TRUE(Contains(evaluate.out, "--json"));
  const Result demo = Run("demo --help");
  EXPECT_EQ(demo.code, 0);
  EXPECT_TRUE(Contains(demo.out, "Example"));
}

// Every subcommand is registered (listed by `--help`, in this order, under
// "Subcommands:") and answers its own --help with its usage line and exit 0.
TEST_F(AppTest, HelpListsEverySubcommandAndEachHasHelp) {
  const Result top = Run("--help");
  ASSERT_EQ(top.code, 0) << top.err;
  const std::size_t section = top.out.find("\nSubcommands:\n");
  ASSERT_NE(section, std::string::npos) << top.out;
  std::size_t at = section;
  for (const char* name :
       {"demo", "plan", "evaluate", "simulate", "profile", "gpus", "measure", "power", "serve"}) {
    const std::size_t line = top.out.find("\n  " + std::string(name) + " ", at);
    ASSERT_NE(line, std::string::npos) << name << " not listed (in order)\n" << top.out;
    at = line + 1;
    const Result help = Run(std::string(name) + " --help");
    EXPECT_EQ(help.code, 0) << name << "\n" << help.err;
    EXPECT_TRUE(Contains(help.out, "Usage: joulepipe " + std::string(name) + " [OPTIONS]"))
        << name << "\n"
        << help.out;
    EXPECT_TRUE(help.err.empty()) << name << "\n" << help.err;
  }
}

TEST_F(AppTest, VersionAndUsageErrors) {
  const Result version = Run("--version");
  EXPECT_EQ(version.code, 0);
  EXPECT_EQ(version.out, "0.1.0\n");
  EXPECT_EQ(Run("").code, 2);
  EXPECT_EQ(Run("frobnicate").code, 2);
  const Result missing = Run("evaluate --plan x.json --p-block 1");
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(Contains(missing.err, "--profile")) << missing.err;
}

std::vector<solver::FrontierPoint> Points(const std::vector<double>& times) {
  std::vector<solver::FrontierPoint> points;
  double energy = 1000;
  for (double t : times) points.push_back({t, energy--, {}, {}, {}});
  return points;
}

TEST(SelectPointsTest, AllWhenUnlimitedOrFew) {
  const auto points = Points({1, 2, 3, 4});
  EXPECT_EQ(SelectPoints(points, 1, 0), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(SelectPoints(points, 1, 4), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(SelectPoints(points, 1, 9), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(SelectPoints({}, 0, 3).empty());
}

TEST(SelectPointsTest, KeepsEndsAndChosenAndSpreadsEvenlyInTime) {
  // Dense at the start, sparse later: even in time, not in index.
  std::vector<double> times;
  for (int i = 0; i < 90; ++i) times.push_back(1.0 + i * 0.001);  // 1.000 .. 1.089
  for (int i = 1; i <= 10; ++i) times.push_back(1.0 + i * 0.1);   // 1.1 .. 2.0
  const auto points = Points(times);
  const std::vector<size_t> picked = SelectPoints(points, 42, 5);
  ASSERT_EQ(picked.size(), 5u);
  EXPECT_EQ(picked.front(), 0u);
  EXPECT_EQ(picked.back(), 99u);
  EXPECT_NE(std::find(picked.begin(), picked.end(), 42u), picked.end());
  // Two free slots go near t = 1.333 and 1.667, i.e. the sparse tail.
  EXPECT_DOUBLE_EQ(points[picked[2]].time_s, 1.3);
  EXPECT_DOUBLE_EQ(points[picked[3]].time_s, 1.7);
  EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
}

TEST(SelectPointsTest, NeverPicksAPointTwice) {
  const auto points = Points({1, 1.001, 1.002, 5, 9});
  const std::vector<size_t> picked = SelectPoints(points, 0, 4);
  // Targets 3.67 (nearest: 5) and 6.33 (nearest free one: 1.002, as 5 and
  // 9 are taken).
  EXPECT_EQ(picked, (std::vector<size_t>{0, 2, 3, 4}));
}

}  // namespace
}  // namespace joulepipe::cli
