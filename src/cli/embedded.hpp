// The stage profile built into the joulepipe binary, used by `joulepipe demo`.
//
// It is data/profiles/gpt3-175b+a100_sxm_bf16.csv, embedded at build time by
// cmake/embed_text.cmake: the measured per-stage forward/backward time and
// energy of GPT-3 175B (8 pipeline stages, bf16) on A100-SXM at every SM
// clock, from the Perseus SOSP'24 artifact.
#pragma once

#include <string_view>

#include "joulepipe/model/profile.hpp"

namespace joulepipe::cli {

// The CSV bytes. Defined in the generated demo_profile.cpp.
std::string_view EmbeddedDemoProfile();

// How messages and summaries name the embedded profile.
inline constexpr std::string_view kEmbeddedDemoProfileName = "embedded GPT-3 175B A100-SXM profile";

// The embedded profile, parsed. Throws model::InputError only if the build
// embedded a broken file.
model::Profile LoadEmbeddedDemoProfile();

}  // namespace joulepipe::cli
