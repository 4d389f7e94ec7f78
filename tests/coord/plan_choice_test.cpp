// The Perseus straggler rule over a candidate list.
#include "joulepipe/coord/plan_choice.hpp"

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::coord {
namespace {

// Time up, energy down, plus one dominated candidate (index 3: slower and
// dearer than index 1).
std::vector<Candidate> Frontier() {
  return {{1.00, 100}, {1.10, 90}, {1.25, 82}, {1.20, 95}, {1.50, 78}};
}

TEST(CandidateIndex, BestWithinIsTheLeastEnergyThatFits) {
  const CandidateIndex index(Frontier(), 0);
  EXPECT_EQ(index.BestWithin(0.99), -1);
  EXPECT_EQ(index.BestWithin(1.00), 0);
  EXPECT_EQ(index.BestWithin(1.19), 1);
  EXPECT_EQ(index.BestWithin(1.22), 1);  // the dominated 1.20 never wins
  EXPECT_EQ(index.BestWithin(1.30), 2);
  EXPECT_EQ(index.BestWithin(9.00), 4);
  EXPECT_EQ(index.chain(), (std::vector<int>{0, 1, 2, 4}));
}

TEST(CandidateIndex, NoStragglerKeepsEveryPipelineOnTheIntrinsicPlan) {
  const CandidateIndex index(Frontier(), 0);
  const PlanChoice c = index.Choose({1, 1, 1});
  EXPECT_EQ(c.candidate_of_pipeline, (std::vector<int>{0, 0, 0}));
  EXPECT_DOUBLE_EQ(c.target_s, 1.0);
}

TEST(CandidateIndex, OthersSlowDownToTheStragglersTime) {
  const CandidateIndex index(Frontier(), 0);
  // Pipeline 1 at 1.25x: T' = 1.25; the others take the 1.25 s plan, the
  // straggler keeps the intrinsic one.
  PlanChoice c = index.Choose({1, 1.25, 1});
  EXPECT_EQ(c.candidate_of_pipeline, (std::vector<int>{2, 0, 2}));
  EXPECT_DOUBLE_EQ(c.target_s, 1.25);
  // A second, milder straggler stretches its plan by its own slowdown:
  // 1.10 * 1.1 = 1.21 <= 1.25, 1.25 * 1.1 > 1.25.
  c = index.Choose({1, 1.25, 1.1});
  EXPECT_EQ(c.candidate_of_pipeline, (std::vector<int>{2, 0, 1}));
}

TEST(CandidateIndex, NeverPicksACandidateDearerThanTheIntrinsicOne) {
  // Intrinsic = index 1 (1.1 s, 90 J); within 1.0 * T' nothing cheaper.
  const CandidateIndex index({{1.0, 100}, {1.1, 90}}, 1);
  const PlanChoice c = index.Choose({1.05, 1});
  EXPECT_EQ(c.candidate_of_pipeline, (std::vector<int>{1, 1}));
}

TEST(CandidateIndex, RefusesEmptyListsBadIndicesAndBadTimes) {
  EXPECT_THROW(CandidateIndex({}, 0), model::InputError);
  EXPECT_THROW(CandidateIndex(Frontier(), 5), model::InputError);
  try {
    CandidateIndex({{1, 1}, {0, 1}}, 0);
    ADD_FAILURE() << "no error";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "Candidate::time_s");
    EXPECT_NE(std::string(e.what()).find("candidate 1 has time 0 s"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace joulepipe::coord
