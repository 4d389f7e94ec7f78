#include "joulepipe/model/energy.hpp"

#include <cmath>
#include <cstdio>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

void CheckPBlock(double p_block_w, const std::string& field) {
  // The highest board power of any GPU joulepipe knows is ~1,000 W; 5 kW
  // leaves room for future parts while refusing typos such as 1e308.
  constexpr double kMaxW = 5000;
  if (std::isfinite(p_block_w) && p_block_w >= 0 && p_block_w <= kMaxW) return;
  char got[64];
  std::snprintf(got, sizeof got, "%g", p_block_w);
  throw InputError(field, field + " must be a GPU's power while blocked or idle, in watts, "
                              "0..5000 (got " + got +
                              "); measure it (joulepipe profile in situ records it) or use the "
                              "GPU's idle power, e.g. 83.64 for an A100-SXM");
}

}  // namespace joulepipe::model
