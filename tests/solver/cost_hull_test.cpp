// BuildCostHull on hand-made clock sets (Pareto filtering, lower convex hull,
// points beyond the cheapest, ties in time, the effect of P_block), CostAt
// interpolation, and the hull invariants over random clock sets.

#include "joulepipe/solver/cost_hull.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../test_support/profiles.hpp"

namespace joulepipe::solver {
namespace {

using model::testing::Point;

std::vector<int> Clocks(const std::vector<Option>& options) {
  std::vector<int> mhz;
  for (const Option& o : options) mhz.push_back(o.mhz);
  return mhz;
}

// The invariants cost_hull.hpp promises, for any input.
void ExpectHullInvariants(const std::vector<model::ClockPoint>& points, double p_block,
                          const CostHull& hull) {
  ASSERT_FALSE(hull.pareto.empty());
  ASSERT_FALSE(hull.vertices.empty());
  ASSERT_EQ(hull.vertices.size(), hull.vertex_in_pareto.size());
  // Pareto: ascending time, strictly descending cost, real measured clocks.
  for (size_t i = 0; i < hull.pareto.size(); ++i) {
    const Option& o = hull.pareto[i];
    EXPECT_DOUBLE_EQ(o.cost_j, o.energy_j - p_block * o.time_s);
    const auto same = std::find_if(points.begin(), points.end(), [&](const model::ClockPoint& p) {
      return p.mhz == o.mhz && p.time_s == o.time_s && p.energy_j == o.energy_j;
    });
    EXPECT_NE(same, points.end()) << "pareto clock " << o.mhz << " is not a measured point";
    if (i > 0) {
      EXPECT_LT(hull.pareto[i - 1].time_s, o.time_s);
      EXPECT_GT(hull.pareto[i - 1].cost_j, o.cost_j);
    }
  }
  // Every measured point is weakly dominated by a Pareto point, and no Pareto
  // point is strictly dominated by a measured one.
  for (const model::ClockPoint& p : points) {
    const double cost = p.energy_j - p_block * p.time_s;
    const bool covered = std::any_of(hull.pareto.begin(), hull.pareto.end(), [&](const Option& o) {
      return o.time_s <= p.time_s && o.cost_j <= cost;
    });
    EXPECT_TRUE(covered) << "clock " << p.mhz << " dropped but not dominated";
    for (const Option& o : hull.pareto) {
      EXPECT_FALSE(p.time_s <= o.time_s && cost <= o.cost_j &&
                   (p.time_s < o.time_s || cost < o.cost_j))
          << "pareto clock " << o.mhz << " is dominated by clock " << p.mhz;
    }
  }
  // Vertices: Pareto points (as mapped), from the fastest to the cheapest,
  // convex, and every Pareto point on or above the hull.
  for (size_t k = 0; k < hull.vertices.size(); ++k) {
    const int index = hull.vertex_in_pareto[k];
    ASSERT_GE(index, 0);
    ASSERT_LT(index, static_cast<int>(hull.pareto.size()));
    EXPECT_EQ(hull.vertices[k].mhz, hull.pareto[index].mhz);
    EXPECT_EQ(hull.vertices[k].time_s, hull.pareto[index].time_s);
    EXPECT_EQ(hull.vertices[k].cost_j, hull.pareto[index].cost_j);
    if (k > 0) {
      EXPECT_LT(hull.vertex_in_pareto[k - 1], index);
    }
  }
  EXPECT_EQ(hull.vertex_in_pareto.front(), 0);
  EXPECT_EQ(hull.vertex_in_pareto.back(), static_cast<int>(hull.pareto.size()) - 1);
  for (int k = 0; k + 2 < static_cast<int>(hull.vertices.size()); ++k) {
    EXPECT_GT(hull.SegmentSlope(k), 0);
    EXPECT_GE(hull.SegmentSlope(k), hull.SegmentSlope(k + 1) * (1 - 1e-12))
        << "slopes must flatten towards the cheapest vertex";
  }
  for (const Option& o : hull.pareto) {
    const double scale = 1 + std::abs(o.cost_j);
    EXPECT_LE(hull.CostAt(o.time_s), o.cost_j + 1e-9 * scale) << "clock " << o.mhz;
  }
  for (const Option& v : hull.vertices) {
    EXPECT_NEAR(hull.CostAt(v.time_s), v.cost_j, 1e-9 * (1 + std::abs(v.cost_j)));
  }
}

TEST(CostHull, DropsDominatedClock) {
  // 1200 MHz is slower and costlier than 1300 MHz.
  const std::vector<model::ClockPoint> points = {Point(1410, 1.0, 100), Point(1300, 1.1, 90),
                                                 Point(1200, 1.2, 95), Point(1100, 1.4, 80)};
  const CostHull hull = BuildCostHull(points, 0);
  EXPECT_EQ(Clocks(hull.pareto), (std::vector<int>{1410, 1300, 1100}));
  ExpectHullInvariants(points, 0, hull);
}

TEST(CostHull, LowerConvexHullSkipsPointsAboveTheChord) {
  // (t, cost): (1, 100), (2, 90), (3, 50), (4, 40), (6, 35). The chord from
  // (1, 100) to (3, 50) is at 75 for t = 2: 90 lies above it.
  const std::vector<model::ClockPoint> points = {Point(1410, 1, 100), Point(1300, 2, 90),
                                                 Point(1200, 3, 50), Point(1100, 4, 40),
                                                 Point(1000, 6, 35)};
  const CostHull hull = BuildCostHull(points, 0);
  EXPECT_EQ(Clocks(hull.pareto), (std::vector<int>{1410, 1300, 1200, 1100, 1000}));
  EXPECT_EQ(Clocks(hull.vertices), (std::vector<int>{1410, 1200, 1100, 1000}));
  EXPECT_EQ(hull.vertex_in_pareto, (std::vector<int>{0, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(hull.SegmentSlope(0), 25);   // (100 - 50) / 2
  EXPECT_DOUBLE_EQ(hull.SegmentSlope(1), 10);   // (50 - 40) / 1
  EXPECT_DOUBLE_EQ(hull.SegmentSlope(2), 2.5);  // (40 - 35) / 2
  ExpectHullInvariants(points, 0, hull);
}

TEST(CostHull, CollinearMiddlePointAddsNoKink) {
  const std::vector<model::ClockPoint> points = {Point(1410, 1, 100), Point(1300, 2, 80),
                                                 Point(1200, 3, 60)};
  const CostHull hull = BuildCostHull(points, 0);
  EXPECT_EQ(hull.pareto.size(), 3u);
  EXPECT_EQ(hull.vertices.front().mhz, 1410);
  EXPECT_EQ(hull.vertices.back().mhz, 1200);
  EXPECT_DOUBLE_EQ(hull.CostAt(2), 80);
  EXPECT_DOUBLE_EQ(hull.CostAt(2.5), 70);
  ExpectHullInvariants(points, 0, hull);
}

TEST(CostHull, DropsClocksBeyondTheCheapest) {
  // Below 1200 MHz energy rises again (static power dominates): slower AND
  // costlier than 1200 MHz, so never useful.
  const std::vector<model::ClockPoint> points = {Point(1410, 1.0, 100), Point(1200, 1.5, 70),
                                                 Point(1000, 2.0, 75), Point(800, 2.8, 90)};
  const CostHull hull = BuildCostHull(points, 0);
  EXPECT_EQ(Clocks(hull.pareto), (std::vector<int>{1410, 1200}));
  EXPECT_EQ(Clocks(hull.vertices), (std::vector<int>{1410, 1200}));
  EXPECT_DOUBLE_EQ(hull.CostAt(5.0), 70);  // beyond the cheapest: its cost
  ExpectHullInvariants(points, 0, hull);
}

TEST(CostHull, BlockingPowerMakesSlowClocksWorthwhile) {
  // Same points with P_block = 20 W: cost = e - 20 t = 80, 40, 35, 34. The
  // GPU burns P_block anyway while blocked, so the slower clocks now pay.
  const std::vector<model::ClockPoint> points = {Point(1410, 1.0, 100), Point(1200, 1.5, 70),
                                                 Point(1000, 2.0, 75), Point(800, 2.8, 90)};
  const CostHull hull = BuildCostHull(points, 20);
  EXPECT_EQ(Clocks(hull.pareto), (std::vector<int>{1410, 1200, 1000, 800}));
  EXPECT_DOUBLE_EQ(hull.pareto[0].cost_j, 80);
  EXPECT_DOUBLE_EQ(hull.pareto[1].cost_j, 40);
  EXPECT_DOUBLE_EQ(hull.pareto[2].cost_j, 35);
  EXPECT_DOUBLE_EQ(hull.pareto[3].cost_j, 34);
  EXPECT_DOUBLE_EQ(hull.pareto[2].energy_j, 75);  // measured energy kept
  // Slopes 80, 10, 1.25: all vertices.
  EXPECT_EQ(Clocks(hull.vertices), (std::vector<int>{1410, 1200, 1000, 800}));
  ExpectHullInvariants(points, 20, hull);
}

TEST(CostHull, TiesInTimeKeepTheCheaperClock) {
  const std::vector<model::ClockPoint> points = {Point(1410, 1.0, 100), Point(1395, 1.0, 95),
                                                 Point(1300, 1.5, 80)};
  const CostHull hull = BuildCostHull(points, 0);
  EXPECT_EQ(Clocks(hull.pareto), (std::vector<int>{1395, 1300}));
  ExpectHullInvariants(points, 0, hull);

  // Equal time and energy: exactly one of them stays.
  const std::vector<model::ClockPoint> same = {Point(1410, 1.0, 100), Point(1395, 1.0, 100),
                                               Point(1300, 1.5, 80)};
  const CostHull tied = BuildCostHull(same, 0);
  ASSERT_EQ(tied.pareto.size(), 2u);
  EXPECT_TRUE(tied.pareto[0].mhz == 1410 || tied.pareto[0].mhz == 1395);
  EXPECT_EQ(tied.pareto[1].mhz, 1300);
  ExpectHullInvariants(same, 0, tied);

  // Equal time at the slow end: the cheaper one is the cheapest vertex.
  const std::vector<model::ClockPoint> tail = {Point(1410, 1.0, 100), Point(1000, 2.0, 70),
                                               Point(990, 2.0, 60)};
  const CostHull tail_hull = BuildCostHull(tail, 0);
  EXPECT_EQ(Clocks(tail_hull.pareto), (std::vector<int>{1410, 990}));
  ExpectHullInvariants(tail, 0, tail_hull);
}

TEST(CostHull, InputOrderDoesNotMatter) {
  std::vector<model::ClockPoint> points = {Point(1410, 1, 100), Point(1300, 2, 90),
                                           Point(1200, 3, 50),  Point(1100, 4, 40),
                                           Point(1000, 6, 35),  Point(900, 7, 36)};
  const CostHull reference = BuildCostHull(points, 5);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(points.begin(), points.end(), rng);
    const CostHull hull = BuildCostHull(points, 5);
    EXPECT_EQ(Clocks(hull.pareto), Clocks(reference.pareto));
    EXPECT_EQ(Clocks(hull.vertices), Clocks(reference.vertices));
    EXPECT_EQ(hull.vertex_in_pareto, reference.vertex_in_pareto);
  }
}

TEST(CostHull, SinglePoint) {
  const std::vector<model::ClockPoint> points = {Point(1410, 2.0, 300)};
  const CostHull hull = BuildCostHull(points, 50);
  ASSERT_EQ(hull.pareto.size(), 1u);
  ASSERT_EQ(hull.vertices.size(), 1u);
  EXPECT_EQ(hull.vertex_in_pareto, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(hull.vertices[0].cost_j, 200);
  EXPECT_DOUBLE_EQ(hull.CostAt(1.0), 200);
  EXPECT_DOUBLE_EQ(hull.CostAt(2.0), 200);
  EXPECT_DOUBLE_EQ(hull.CostAt(3.0), 200);
}

TEST(CostHull, CostAtInterpolatesLinearlyBetweenVertices) {
  const std::vector<model::ClockPoint> points = {Point(1410, 1, 100), Point(1200, 3, 50),
                                                 Point(1000, 7, 30)};
  const CostHull hull = BuildCostHull(points, 0);
  ASSERT_EQ(hull.vertices.size(), 3u);
  EXPECT_DOUBLE_EQ(hull.CostAt(0.5), 100);  // faster than the fastest: its cost
  EXPECT_DOUBLE_EQ(hull.CostAt(1), 100);
  EXPECT_DOUBLE_EQ(hull.CostAt(1.5), 87.5);
  EXPECT_DOUBLE_EQ(hull.CostAt(2), 75);
  EXPECT_DOUBLE_EQ(hull.CostAt(3), 50);
  EXPECT_DOUBLE_EQ(hull.CostAt(4), 45);
  EXPECT_DOUBLE_EQ(hull.CostAt(6), 35);
  EXPECT_DOUBLE_EQ(hull.CostAt(7), 30);
  EXPECT_DOUBLE_EQ(hull.CostAt(9), 30);
}

TEST(CostHull, InvariantsOnRandomClockSets) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    const int count = 1 + static_cast<int>(unit(rng) * 12);
    const double p_block = trial % 3 == 0 ? 0 : 100 * unit(rng);
    std::vector<model::ClockPoint> points;
    for (int i = 0; i < count; ++i) {
      const int mhz = 1500 - 30 * i;
      // Coarse values so that ties in time and cost happen.
      const double time = 1 + std::floor(unit(rng) * 8) / 4;
      const double energy = 100 + std::floor(unit(rng) * 20) * 10;
      points.push_back(Point(mhz, time, energy));
    }
    SCOPED_TRACE(trial);
    const CostHull hull = BuildCostHull(points, p_block);
    ExpectHullInvariants(points, p_block, hull);
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace joulepipe::solver
