// runtime::UnmeasuredPBlock (profiler.hpp): the catalogue's P_block for a
// job whose waits were all too short to measure it.
#include "joulepipe/model/format.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/runtime/profiler.hpp"

namespace joulepipe::runtime {

std::optional<PBlockFallback> UnmeasuredPBlock(const ProfileReport& merged,
                                               std::string_view gpu_name) {
  if (merged.p_block_samples > 0) return std::nullopt;
  const physics::GpuSpec* gpu = physics::FindGpuOrNull(gpu_name);
  if (gpu == nullptr) return std::nullopt;
  PBlockFallback out;
  out.watts = gpu->p_block_w;
  out.note = model::Format(
      "no wait in this job was long enough to measure the GPU's power while blocked (P_block; a "
      "pipeline of one stage has no bubbles): planning with %g W, the catalogue's figure for %s",
      gpu->p_block_w, gpu->name.c_str());
  return out;
}

}  // namespace joulepipe::runtime
