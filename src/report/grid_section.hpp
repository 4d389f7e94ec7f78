// The report's "What the grid sees" section: a simulation's waveform
// excerpt (`simulate --grid --json`, or the demo's) drawn as the job's power
// at its start and over its first iteration, with the grid plan's floors
// when there is one, and as its amplitude spectrum with the band's edges.
#pragma once

#include <optional>

#include "joulepipe/report/html_page.hpp"
#include "joulepipe/report/plan_report.hpp"

namespace joulepipe::report {

// None when the simulation has no waveform. Throws model::InputError naming
// the file and the field when the waveform is malformed.
std::optional<HtmlSection> GridSection(const PlanReportInputs& inputs);

}  // namespace joulepipe::report
