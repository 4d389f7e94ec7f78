#include "joulepipe/schedule/profile_fit.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::schedule {

namespace {

using model::InputError;

std::string Number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// Every virtual stage 0..S*V-1 needs forward and backward rows. The profile
// has no stage above S*V-1 (the caller checked num_stages) and none below 0
// (Profile::Add refuses them), so this completes the check.
void CheckVirtualStages(const model::Profile& profile, const Spec& spec,
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
  // From the gaps between the stages that have rows: the cost follows the
  // rows, not the highest id (a single row for stage 1,000,000 names one
  // range, it does not list a million ids).
  std::string out;
  std::int64_t count = 0;
  int next = 0;  // the lowest stage id not yet accounted for
  for (int s : profile.stages()) {
    if (s > next) {
      out += (out.empty() ? "" : ", ") + std::to_string(next);
      if (s - 1 > next) out += ".." + std::to_string(s - 1);
      count += s - next;
    }
    next = s + 1;
  }
  if (count == 0) return out;
  return (count == 1 ? "stage " : "stages ") + out;
}

void CheckProfileFits(const model::Profile& profile, const Spec& spec,
                      const std::string& profile_name) {
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
  message += ") but Spec::stages " + std::to_string(physical);
  if (interleaved) message += " with Spec::chunks " + std::to_string(spec.chunks);
  message += " needs ";
  if (interleaved) {
    message += "either " + std::to_string(physical) + " profiled stages (ids 0.." +
               std::to_string(physical - 1) + ", every chunk uses its physical stage's rows) or " +
               std::to_string(virtual_stages) + " (ids 0.." + std::to_string(virtual_stages - 1) +
               ", one per virtual stage, id = chunk * stages + stage)";
  } else {
    message += std::to_string(physical) + " (ids 0.." + std::to_string(physical - 1) + ")";
  }
  if (!missing.empty()) {
    message += "; stage ids must be 0..S-1 without gaps; renumber the profile's stages";
  } else if (interleaved) {
    message +=
        "; set Spec::stages and Spec::chunks to match the profile, or use a profile of this "
        "pipeline";
  } else {
    message += "; set Spec::stages to " + std::to_string(found) +
               " if the profile is right, or use a profile of " + std::to_string(physical) +
               " stages";
  }
  throw InputError("Spec::stages", message);
}

PBlockChoice ResolvePBlock(std::optional<double> requested, const model::Profile& profile,
                           const std::string& field, const std::string& profile_name) {
  const std::optional<double>& recorded = profile.metadata.p_block_w;
  PBlockChoice choice;
  if (requested) {
    model::CheckPBlock(*requested, field);
    choice.watts = *requested;
    choice.source = "request";
    if (recorded && std::abs(*requested - *recorded) > 0.005 * std::abs(*recorded)) {
      choice.notes.push_back(field + " is " + Number(*requested) + " W but " + profile_name +
                             " records P_block " + Number(*recorded) +
                             " W (its p_block_w); using " + Number(*requested) + " W");
    }
    return choice;
  }
  if (!recorded) {
    throw InputError(field, field + " is not set and " + profile_name +
                                " records no P_block (GPU power while blocked or idle; a "
                                "Perseus/Zeus profile CSV has none): set " +
                                field +
                                ", e.g. 83.64 for an A100-SXM, or make the profile with "
                                "joulepipe profile, which records it");
  }
  try {
    model::CheckPBlock(*recorded, "p_block_w");
  } catch (const InputError& e) {
    throw InputError(profile_name + ": its metadata " + e.what());
  }
  choice.watts = *recorded;
  choice.source = "profile";
  return choice;
}

}  // namespace joulepipe::schedule
