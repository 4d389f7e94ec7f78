// ComposePartitions (knob_options.hpp): the per-stage options of
// partitioned instructions equal the Pareto set of every combination (one
// clock, one knob setting per partition), enumerated by brute force on
// synthetic partitions; with one setting per partition it is the sum per
// clock, filtered.
#include "joulepipe/model/knob_options.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {
namespace {

std::vector<ComposedOption> BruteForce(const std::vector<std::vector<PartitionOption>>& parts,
                                       const std::vector<int>& clocks) {
  std::vector<ComposedOption> all;
  for (int mhz : clocks) {
    std::vector<ComposedOption> sums = {{mhz, {}, 0, 0}};
    for (const auto& part : parts) {
      std::vector<ComposedOption> next;
      for (const ComposedOption& s : sums) {
        for (const PartitionOption& o : part) {
          if (o.mhz != mhz) continue;
          ComposedOption c = s;
          c.knobs.push_back(o.knobs);
          c.time_s += o.time_s;
          c.energy_j += o.energy_j;
          next.push_back(c);
        }
      }
      sums = next;  // every combination, nothing filtered
    }
    all.insert(all.end(), sums.begin(), sums.end());
  }
  // Keep the non-dominated (no other at most as slow and strictly cheaper,
  // or strictly faster and at most as expensive).
  std::vector<ComposedOption> out;
  for (const ComposedOption& a : all) {
    bool dominated = false;
    for (const ComposedOption& b : all) {
      if ((b.time_s <= a.time_s && b.energy_j < a.energy_j) ||
          (b.time_s < a.time_s && b.energy_j <= a.energy_j)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) out.push_back(a);
  }
  std::sort(out.begin(), out.end(),
            [](const ComposedOption& a, const ComposedOption& b) { return a.time_s < b.time_s; });
  return out;
}

TEST(ComposePartitions, IsTheParetoSetOfEveryCombination) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  const std::vector<int> clocks = {1410, 1200, 1005, 810};
  int options_seen = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int partitions = 1 + trial % 4;
    std::vector<std::vector<PartitionOption>> parts(partitions);
    for (int p = 0; p < partitions; ++p) {
      const int knobs = 1 + (trial + p) % 3;
      for (int k = 0; k < knobs; ++k) {
        for (int mhz : clocks) {
          // Faster knob settings draw more (overlap costs power), clocks
          // trade time for energy; noise makes some dominated.
          const double t = 0.01 * u(rng) * (1 + 0.2 * k) * 1410.0 / mhz;
          const double e = t * (120 + 250 * std::pow(mhz / 1410.0, 2.5)) * (1.3 - 0.1 * k) * u(rng);
          parts[p].push_back({mhz, "overlap=" + std::to_string(k), t, e});
        }
      }
    }
    const std::vector<ComposedOption> got = ComposePartitions(parts);
    const std::vector<ComposedOption> want = BruteForce(parts, clocks);
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i].time_s, want[i].time_s, 1e-15) << trial << " " << i;
      EXPECT_NEAR(got[i].energy_j, want[i].energy_j, 1e-12) << trial << " " << i;
      EXPECT_EQ(got[i].knobs.size(), static_cast<std::size_t>(partitions));
      if (i > 0) {
        EXPECT_GT(got[i].time_s, got[i - 1].time_s);
        EXPECT_LT(got[i].energy_j, got[i - 1].energy_j);
      }
    }
    options_seen += static_cast<int>(got.size());
  }
  EXPECT_GT(options_seen, 100);
}

TEST(ComposePartitions, OneSettingPerPartitionIsTheSumAtEachClock) {
  // Two partitions, one knob setting each: one option per clock, the sum.
  const std::vector<std::vector<PartitionOption>> parts = {
      {{1410, "a", 0.010, 3.0}, {1005, "a", 0.013, 2.4}},
      {{1410, "b", 0.020, 6.0}, {1005, "b", 0.026, 5.0}}};
  const std::vector<ComposedOption> got = ComposePartitions(parts);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].mhz, 1410);
  EXPECT_DOUBLE_EQ(got[0].time_s, 0.030);
  EXPECT_DOUBLE_EQ(got[0].energy_j, 9.0);
  EXPECT_EQ(got[1].mhz, 1005);
  EXPECT_DOUBLE_EQ(got[1].energy_j, 7.4);
  EXPECT_EQ(got[1].knobs, (std::vector<std::string>{"a", "b"}));
}

TEST(ComposePartitions, RefusesWhatCannotCompose) {
  EXPECT_THROW(ComposePartitions({}), InputError);
  EXPECT_THROW(ComposePartitions({{{1410, "a", 0.01, 1}}, {}}), InputError);
  EXPECT_THROW(ComposePartitions({{{1410, "a", 0.01, 1}}, {{1005, "b", 0.01, 1}}}), InputError);
  EXPECT_THROW(ComposePartitions({{{1410, "a", -0.01, 1}}}), InputError);
}

}  // namespace
}  // namespace joulepipe::model
