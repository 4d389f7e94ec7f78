// Checks on user input shared by the joulepipe subcommands.
#include "joulepipe/cli/inputs.hpp"

#include <algorithm>
#include <cmath>

#include "joulepipe/cli/format.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// Every virtual stage 0..S*V-1 needs forward and backward rows. The profile
// has no stage above S*V-1 (the caller checked num_stages) and none below 0
// (Profile::Add refuses them), so this completes the check.
void CheckVirtualStages(const model::Profile& profile, const schedule::Spec& spec,
                        const std::string& profile_name) {
  const int virtual_stages = spec.stages * spec.chunks;
  for (int v = 0; v < virtual_stages; ++v) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      if (!profile.Points(v, kind).empty()) continue;
      throw InputError(profile_name + ": profile stage " + std::to_string(v) +
                       " (virtual stage: chunk " + std::to_string(v / spec.stages) + " of stage " +
                       std::to_string(v % spec.stages) + ") has no " +
                       std::string(model::KindName(kind)) + " rows; a profile of " +
                       std::to_string(virtual_stages) +
                       " virtual stages needs forward and backward measurements for every one");
    }
  }
}

}  // namespace

std::string MissingStages(const model::Profile& profile) {
  std::string out;
  int count = 0;
  for (int s = 0; s < profile.num_stages(); ++s) {
    if (!profile.Points(s, model::Kind::kForward).empty() ||
        !profile.Points(s, model::Kind::kBackward).empty()) {
      continue;
    }
    out += (count++ == 0 ? "" : ", ") + std::to_string(s);
  }
  if (count == 0) return out;
  return (count == 1 ? "stage " : "stages ") + out;
}

void CheckPBlock(double p_block_w) {
  if (!std::isfinite(p_block_w) || p_block_w < 0) {
    throw InputError("--p-block must be a finite number of watts >= 0 (got " +
                     Printf("%g", p_block_w) +
                     "); pass the GPU's power while it waits, e.g. --p-block 83.64 for A100-SXM");
  }
}

void CheckProfileFits(const model::Profile& profile, const schedule::Spec& spec,
                      const std::string& profile_name, const std::string& shape,
                      const std::string& fix) {
  const int found = profile.num_stages();
  const int physical = spec.stages;
  const bool interleaved = spec.chunks > 1;
  const long long virtual_stages = static_cast<long long>(spec.stages) * spec.chunks;
  if (interleaved && found == virtual_stages) {
    CheckVirtualStages(profile, spec, profile_name);
    return;
  }
  if (found == physical) {
    // Right count; Validate finds gaps and missing kinds and names them.
    profile.Validate(physical, profile_name);
    return;
  }
  std::string message = profile_name + ": profile's stage ids go up to " +
                        std::to_string(found - 1) + " (" + std::to_string(found) + " stages";
  const std::string missing = MissingStages(profile);
  if (!missing.empty()) message += ", with no rows for " + missing;
  message += ") but " + shape + " needs ";
  if (interleaved) {
    message += "either " + std::to_string(physical) + " profiled stages (ids 0.." +
               std::to_string(physical - 1) + ", every chunk uses its physical stage's rows) or " +
               std::to_string(virtual_stages) + " (ids 0.." + std::to_string(virtual_stages - 1) +
               ", one per virtual stage, id = chunk * stages + stage)";
  } else {
    message += std::to_string(physical) + " (ids 0.." + std::to_string(physical - 1) + ")";
  }
  message += "; " + fix;
  throw InputError(message);
}

schedule::Spec ScheduleFromFlags(const std::string& name, int stages, int microbatches, int chunks,
                                 bool chunks_given) {
  schedule::Spec spec;
  if (!schedule::ParseKind(name, &spec.kind)) {
    throw model::InputError("--schedule '" + name + "' is not one of gpipe, 1f1b, interleaved");
  }
  const bool interleaved = spec.kind == schedule::Kind::kInterleaved;
  if (!interleaved && chunks_given) {
    throw model::InputError("--chunks applies only to --schedule interleaved (got --schedule " +
                            name + "); drop --chunks or use --schedule interleaved");
  }
  if (interleaved && chunks < 2) {
    throw model::InputError("--chunks must be at least 2 for --schedule interleaved (got " +
                            std::to_string(chunks) +
                            "); use --schedule 1f1b for one chunk per stage");
  }
  spec.stages = stages;
  spec.microbatches = microbatches;
  spec.chunks = interleaved ? chunks : 1;
  return spec;
}

void CheckProfileFitsFlags(const model::Profile& profile, const schedule::Spec& spec,
                           const std::string& profile_name) {
  std::string fix;
  if (!MissingStages(profile).empty()) {
    fix = "stage ids must be 0..S-1 without gaps; renumber the profile's stages";
  } else if (spec.chunks > 1) {
    fix = "pass --stages and --chunks that match the profile, or use a profile of this pipeline";
  } else {
    fix = "pass --stages " + std::to_string(profile.num_stages()) +
          " if the profile is right, or use a profile of " + std::to_string(spec.stages) +
          " stages";
  }
  const std::string shape =
      "--stages " + std::to_string(spec.stages) +
      (spec.chunks > 1 ? " --chunks " + std::to_string(spec.chunks) : std::string());
  CheckProfileFits(profile, spec, profile_name, shape, fix);
}

void CheckGridSize(double fastest_s, double slowest_s, double resolution_s) {
  const double deadlines = std::max(0.0, slowest_s - fastest_s) / resolution_s;
  if (deadlines <= kMaxGridDeadlines) return;
  const double finest_ms = (slowest_s - fastest_s) / kMaxGridDeadlines * 1e3;
  throw model::InputError(Printf(
      "--resolution-ms %g would plan about %.0f deadlines between %.6f s and "
      "%.6f s (at most %.0f); use --resolution-ms %.3g or more",
      resolution_s * 1e3, deadlines, fastest_s, slowest_s, kMaxGridDeadlines, finest_ms * 1.001));
}

}  // namespace joulepipe::cli
