// Counter-based random numbers for the simulator: every draw is a pure
// function of (seed, stream, a, b, attempt), so a draw does not depend on how
// many others came before it. Both policies of a run therefore see the same
// GPU speed factors and the same stalls, and results are identical on every
// platform (no std:: distributions, whose output is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>

namespace joulepipe::sim::detail {

// SplitMix64's finaliser: a bijective 64-bit mix.
inline std::uint64_t Mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t Hash(std::uint64_t seed, std::uint64_t stream, std::uint64_t a,
                          std::uint64_t b, std::uint64_t attempt) {
  std::uint64_t h = Mix(seed);
  h = Mix(h ^ stream);
  h = Mix(h ^ a);
  h = Mix(h ^ b);
  return Mix(h ^ attempt);
}

// Uniform in [0, 1) with 53 random bits.
inline double Uniform(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller from two independent hashes.
inline double Normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t a, std::uint64_t b,
                     std::uint64_t attempt) {
  const double u1 = 1.0 - Uniform(Hash(seed, stream, a, b, 2 * attempt));  // (0, 1]
  const double u2 = Uniform(Hash(seed, stream, a, b, 2 * attempt + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace joulepipe::sim::detail
