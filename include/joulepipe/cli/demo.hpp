// `joulepipe demo`: plans one real configuration on the embedded profile
// (embedded.hpp) with no input from the user, and explains the result.
#pragma once

#include <string>

#include "joulepipe/cli/planning.hpp"

namespace joulepipe::cli {

// The demo's fixed inputs: GPT-3 175B on A100-SXM, 1F1B, 8 stages, 48
// microbatches, P_block 83.64 W (Perseus's A100-SXM figure), zero slowdown.
PlanRequest DemoRequest();

// What the demo did, in a few sentences; printed before the summary.
std::string FormatDemoIntro(const PlanOutcome& outcome);

// A table of up to `rows` frontier points evenly spaced in time (always the
// fastest, the chosen and the least-energy point): time, slowdown vs the
// baseline, energy, saving vs the baseline; the chosen row is marked.
std::string FormatFrontierTable(const PlanOutcome& outcome, int rows);

}  // namespace joulepipe::cli
