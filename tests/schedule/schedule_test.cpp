// Schedule orders against hand-worked Megatron sequences, the DAG edge set of a
// tiny case, validation messages, and DAG invariants over many shapes.

#include "joulepipe/schedule/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedule_test_support.hpp"

namespace joulepipe::schedule {
namespace {

using model::Instruction;
using testing::InputErrorOf;
using testing::MakeSpec;

// "F3" / "B0" for one chunk; "c1F3" (chunk 1, forward, microbatch 3) otherwise.
std::string Token(const Instruction& instruction, bool with_chunk) {
  std::string token;
  if (with_chunk) token.append("c").append(std::to_string(instruction.chunk));
  token.append(instruction.kind == model::Kind::kForward ? "F" : "B");
  return token.append(std::to_string(instruction.microbatch));
}

std::string StageString(const Schedule& schedule, int stage) {
  std::string text;
  for (int id : schedule.stage_order[stage]) {
    if (!text.empty()) text += " ";
    text += Token(schedule.nodes[id], schedule.spec.chunks > 1);
  }
  return text;
}

void ExpectOrders(const Schedule& schedule, const std::vector<std::string>& expected) {
  ASSERT_EQ(schedule.stage_order.size(), expected.size());
  for (std::size_t s = 0; s < expected.size(); ++s) {
    EXPECT_EQ(StageString(schedule, static_cast<int>(s)), expected[s]) << "stage " << s;
  }
}

std::string ErrorOf(const Spec& spec) {
  return InputErrorOf([&] { Build(spec); });
}

TEST(ScheduleKind, NamesRoundTrip) {
  for (Kind kind : {Kind::kGPipe, Kind::k1F1B, Kind::kInterleaved}) {
    Kind parsed = Kind::kGPipe;
    ASSERT_TRUE(ParseKind(KindName(kind), &parsed)) << KindName(kind);
    EXPECT_EQ(parsed, kind);
  }
  EXPECT_EQ(KindName(Kind::kGPipe), "gpipe");
  EXPECT_EQ(KindName(Kind::k1F1B), "1f1b");
  EXPECT_EQ(KindName(Kind::kInterleaved), "interleaved");
  Kind untouched = Kind::k1F1B;
  EXPECT_FALSE(ParseKind("", &untouched));
  EXPECT_FALSE(ParseKind("zero-bubble", &untouched));
  EXPECT_FALSE(ParseKind("1f1b ", &untouched));
  EXPECT_EQ(untouched, Kind::k1F1B);
}

// Warm-up min(S-s-1, M); then F/B pairs; then cool-down backwards.
TEST(ScheduleOrder, OneFOneBFourStagesFourMicrobatches) {
  ExpectOrders(Build(MakeSpec(Kind::k1F1B, 4, 4)), {
                                                       "F0 F1 F2 F3 B0 B1 B2 B3",
                                                       "F0 F1 F2 B0 F3 B1 B2 B3",
                                                       "F0 F1 B0 F2 B1 F3 B2 B3",
                                                       "F0 B0 F1 B1 F2 B2 F3 B3",
                                                   });
}

TEST(ScheduleOrder, OneFOneBFewerMicrobatchesThanStages) {
  // Warm-up is capped at M = 2 on stages 0 and 1.
  ExpectOrders(Build(MakeSpec(Kind::k1F1B, 4, 2)), {
                                                       "F0 F1 B0 B1",
                                                       "F0 F1 B0 B1",
                                                       "F0 F1 B0 B1",
                                                       "F0 B0 F1 B1",
                                                   });
}

TEST(ScheduleOrder, OneFOneBSingleStage) {
  ExpectOrders(Build(MakeSpec(Kind::k1F1B, 1, 3)), {"F0 B0 F1 B1 F2 B2"});
}

TEST(ScheduleOrder, GPipe) {
  ExpectOrders(Build(MakeSpec(Kind::kGPipe, 2, 3)), {
                                                        "F0 F1 F2 B0 B1 B2",
                                                        "F0 F1 F2 B0 B1 B2",
                                                    });
}

// S=2, M=4, V=2: K = 8 virtual microbatches per stage, S*V = 4.
//   k:                0    1    2    3    4    5    6    7
//   forward chunk/mb  0/0  0/1  1/0  1/1  0/2  0/3  1/2  1/3
//   backward chunk/mb 1/0  1/1  0/0  0/1  1/2  1/3  0/2  0/3
// Warm-up: stage 0 min((2-0-1)*2 + (2-1)*2, 8) = 4; stage 1 min(0 + 2, 8) = 2.
// Stage 0: F k0..3 | F4 B0 F5 B1 F6 B2 F7 B3 | B4..7
// Stage 1: F k0..1 | F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 | B6 B7
TEST(ScheduleOrder, InterleavedTwoStagesFourMicrobatchesTwoChunks) {
  ExpectOrders(Build(MakeSpec(Kind::kInterleaved, 2, 4, 2)),
               {
                   "c0F0 c0F1 c1F0 c1F1 c0F2 c1B0 c0F3 c1B1 c1F2 c0B0 c1F3 c0B1 "
                   "c1B2 c1B3 c0B2 c0B3",
                   "c0F0 c0F1 c1F0 c1B0 c1F1 c1B1 c0F2 c0B0 c0F3 c0B1 c1F2 c1B2 c1F3 c1B3 "
                   "c0B2 c0B3",
               });
}

// M == S: Megatron runs every forward as warm-up on every stage.
TEST(ScheduleOrder, InterleavedMicrobatchesEqualStages) {
  ExpectOrders(Build(MakeSpec(Kind::kInterleaved, 2, 2, 2)),
               {
                   "c0F0 c0F1 c1F0 c1F1 c1B0 c1B1 c0B0 c0B1",
                   "c0F0 c0F1 c1F0 c1F1 c1B0 c1B1 c0B0 c0B1",
               });
}

// S=2, M=6, V=3: S*V = 6, K = 18; warm-up stage 0: 2 + 4 = 6, stage 1: 0 + 4 = 4.
//   k:        0    1    2    3    4    5  | 6    7    8    9    10   11 | 12 ...
//   forward   0/0  0/1  1/0  1/1  2/0  2/1| 0/2  0/3  1/2  1/3  2/2  2/3| 0/4 0/5 1/4 1/5 2/4 2/5
//   backward  2/0  2/1  1/0  1/1  0/0  0/1| 2/2  ...
TEST(ScheduleOrder, InterleavedThreeChunksStageOneWarmup) {
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 2, 6, 3));
  const std::string stage1 = StageString(schedule, 1);
  EXPECT_EQ(stage1.substr(0, std::string("c0F0 c0F1 c1F0 c1F1 c2F0 c2B0 c2F1 c2B1").size()),
            "c0F0 c0F1 c1F0 c1F1 c2F0 c2B0 c2F1 c2B1");
  const std::string stage0 = StageString(schedule, 0);
  EXPECT_EQ(stage0.substr(0, std::string("c0F0 c0F1 c1F0 c1F1 c2F0 c2F1 c0F2 c2B0").size()),
            "c0F0 c0F1 c1F0 c1F1 c2F0 c2F1 c0F2 c2B0");
  EXPECT_EQ(stage0.substr(stage0.size() - std::string("c1B5 c0B4 c0B5").size()), "c1B5 c0B4 c0B5");
}

using Edge = std::pair<std::string, std::string>;  // "s<stage>:<token>" pairs

std::string Label(const Schedule& schedule, int id) {
  const Instruction& instruction = schedule.nodes[id];
  std::string label("s");
  label.append(std::to_string(instruction.stage)).append(":");
  return label.append(Token(instruction, schedule.spec.chunks > 1));
}

std::set<Edge> Edges(const Schedule& schedule) {
  std::set<Edge> edges;
  for (int u = 0; u < schedule.num_nodes(); ++u) {
    for (int v : schedule.successors[u]) edges.insert({Label(schedule, u), Label(schedule, v)});
  }
  return edges;
}

TEST(ScheduleEdges, OneFOneBTwoStagesTwoMicrobatches) {
  // Stage 0: F0 F1 B0 B1 (warm-up 1); stage 1: F0 B0 F1 B1 (warm-up 0).
  const Schedule schedule = Build(MakeSpec(Kind::k1F1B, 2, 2));
  ExpectOrders(schedule, {"F0 F1 B0 B1", "F0 B0 F1 B1"});
  const std::set<Edge> expected = {
      // Same stage, consecutive.
      {"s0:F0", "s0:F1"},
      {"s0:F1", "s0:B0"},
      {"s0:B0", "s0:B1"},
      {"s1:F0", "s1:B0"},  // also forward -> backward of the last stage
      {"s1:B0", "s1:F1"},
      {"s1:F1", "s1:B1"},  // also forward -> backward of the last stage
      // Forward to the next stage, backward to the previous one.
      {"s0:F0", "s1:F0"},
      {"s0:F1", "s1:F1"},
      {"s1:B0", "s0:B0"},
      {"s1:B1", "s0:B1"},
  };
  EXPECT_EQ(Edges(schedule), expected);
  int edge_count = 0;
  for (const std::vector<int>& out : schedule.successors) edge_count += out.size();
  EXPECT_EQ(edge_count, 10) << "duplicate edges must be merged";
}

TEST(ScheduleEdges, InterleavedCrossesChunksThroughVirtualStages) {
  // S=2, V=2: virtual stages 0 = s0/c0, 1 = s1/c0, 2 = s0/c1, 3 = s1/c1.
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 2, 2, 2));
  const std::set<Edge> edges = Edges(schedule);
  EXPECT_TRUE(edges.count({"s0:c0F1", "s1:c0F1"}));
  EXPECT_TRUE(edges.count({"s1:c0F1", "s0:c1F1"}));
  EXPECT_TRUE(edges.count({"s0:c1F1", "s1:c1F1"}));
  EXPECT_TRUE(edges.count({"s1:c1F0", "s1:c1B0"}));
  EXPECT_TRUE(edges.count({"s1:c1B0", "s0:c1B0"}));
  EXPECT_TRUE(edges.count({"s0:c1B0", "s1:c0B0"}));
  EXPECT_TRUE(edges.count({"s1:c0B0", "s0:c0B0"}));
  // Chunk 0 of the last physical stage is not the last virtual stage.
  EXPECT_FALSE(edges.count({"s1:c0F0", "s1:c0B0"}));
}

TEST(ScheduleFind, EveryNodeAndAbsentOnes) {
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 4, 8, 3));
  for (int id = 0; id < schedule.num_nodes(); ++id) {
    EXPECT_EQ(schedule.Find(schedule.nodes[id]), id);
  }
  Instruction absent;
  absent.microbatch = 8;
  EXPECT_EQ(schedule.Find(absent), -1);
  absent.microbatch = 0;
  absent.chunk = 3;
  EXPECT_EQ(schedule.Find(absent), -1);
  absent.chunk = 0;
  absent.stage = 4;
  EXPECT_EQ(schedule.Find(absent), -1);
  absent.stage = -1;
  EXPECT_EQ(schedule.Find(absent), -1);
}

TEST(ScheduleFind, HandAssembledScheduleWithOwnNumbering) {
  Schedule schedule;
  schedule.spec = MakeSpec(Kind::k1F1B, 1, 1);
  Instruction backward;
  backward.kind = model::Kind::kBackward;
  schedule.nodes = {backward, Instruction{}};
  EXPECT_EQ(schedule.Find(Instruction{}), 1);
  EXPECT_EQ(schedule.Find(backward), 0);
}

// The field() of the InputError that Build(spec) throws ("" if none).
std::string FieldOf(const Spec& spec) {
  try {
    Build(spec);
  } catch (const model::InputError& error) {
    return error.field();
  }
  return "";
}

// Every message names the Spec field to change, as a "Spec::member" token in
// the text and as field(), and never a front end's flag.
void ExpectNamesField(const Spec& spec, const std::string& field,
                      std::initializer_list<std::string> parts) {
  const std::string message = ErrorOf(spec);
  ASSERT_FALSE(message.empty()) << field;
  EXPECT_EQ(FieldOf(spec), field) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_EQ(message.find("--"), std::string::npos) << message;
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(ScheduleErrors, NameTheFieldToChange) {
  ExpectNamesField(MakeSpec(Kind::k1F1B, 0, 4), "Spec::stages",
                   {"Spec::stages must be at least 1 (got 0)"});
  ExpectNamesField(MakeSpec(Kind::kGPipe, -2, 4), "Spec::stages", {"(got -2)"});
  ExpectNamesField(MakeSpec(Kind::k1F1B, 4, 0), "Spec::microbatches",
                   {"Spec::microbatches must be at least 1 (got 0)"});
  ExpectNamesField(MakeSpec(Kind::kInterleaved, 4, 0, 2), "Spec::microbatches", {});

  ExpectNamesField(MakeSpec(Kind::kInterleaved, 4, 6, 2), "Spec::microbatches",
                   {"Spec::microbatches must be a multiple of Spec::stages",
                    "got 6 microbatches for 4 stages", "set Spec::microbatches to 4 or 8"});
  ExpectNamesField(MakeSpec(Kind::kInterleaved, 4, 3, 2), "Spec::microbatches",
                   {"set Spec::microbatches to 4"});

  ExpectNamesField(MakeSpec(Kind::kInterleaved, 4, 8, 1), "Spec::chunks",
                   {"Spec::chunks must be at least 2", "(got 1)", "set Spec::kind to 1f1b"});
  ExpectNamesField(MakeSpec(Kind::k1F1B, 4, 8, 2), "Spec::chunks",
                   {"Spec::chunks must be 1 for the 1f1b schedule (got 2)",
                    "set Spec::kind to interleaved"});
  ExpectNamesField(MakeSpec(Kind::kGPipe, 4, 8, 0), "Spec::chunks", {"gpipe", "(got 0)"});
  ExpectNamesField(MakeSpec(Kind::k1F1B, 1 << 16, 1 << 16), "Spec::microbatches",
                   {"65536 stages (Spec::stages)", "instructions", "use fewer"});
  ExpectNamesField(MakeSpec(static_cast<Kind>(7), 4, 8), "Spec::kind",
                   {"use gpipe, 1f1b or interleaved"});
}

// Structural invariants that every schedule must satisfy.
void ExpectWellFormed(const Schedule& schedule) {
  const Spec& spec = schedule.spec;
  const int n = schedule.num_nodes();
  ASSERT_EQ(n, 2 * spec.stages * spec.microbatches * spec.chunks);
  ASSERT_EQ(static_cast<int>(schedule.successors.size()), n);
  ASSERT_EQ(static_cast<int>(schedule.predecessors.size()), n);

  // Every instruction exactly once, on its own stage.
  std::vector<int> seen(n, 0);
  for (int s = 0; s < spec.stages; ++s) {
    EXPECT_EQ(static_cast<int>(schedule.stage_order[s].size()),
              2 * spec.microbatches * spec.chunks);
    for (int id : schedule.stage_order[s]) {
      ++seen[id];
      EXPECT_EQ(schedule.nodes[id].stage, s);
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), n);

  // Topological order is a permutation in which every edge goes forward.
  ASSERT_EQ(static_cast<int>(schedule.topological_order.size()), n);
  std::vector<int> position(n, -1);
  for (int i = 0; i < n; ++i) {
    const int id = schedule.topological_order[i];
    ASSERT_GE(id, 0);
    ASSERT_LT(id, n);
    ASSERT_EQ(position[id], -1) << "node listed twice";
    position[id] = i;
  }
  int edges = 0;
  for (int u = 0; u < n; ++u) {
    const std::vector<int>& out = schedule.successors[u];
    EXPECT_EQ(std::set<int>(out.begin(), out.end()).size(), out.size()) << "duplicate successor";
    for (int v : out) {
      ++edges;
      EXPECT_LT(position[u], position[v]);
      const std::vector<int>& in = schedule.predecessors[v];
      EXPECT_EQ(std::count(in.begin(), in.end(), u), 1);
    }
  }
  int reverse_edges = 0;
  for (const std::vector<int>& in : schedule.predecessors) reverse_edges += in.size();
  EXPECT_EQ(edges, reverse_edges);
}

TEST(ScheduleInvariants, RandomShapes) {
  std::mt19937 random(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    const int stages = std::uniform_int_distribution<int>(1, 9)(random);
    const Kind kind = static_cast<Kind>(std::uniform_int_distribution<int>(0, 2)(random));
    int microbatches = std::uniform_int_distribution<int>(1, 20)(random);
    int chunks = 1;
    if (kind == Kind::kInterleaved) {
      microbatches = stages * std::uniform_int_distribution<int>(1, 5)(random);
      chunks = std::uniform_int_distribution<int>(2, 4)(random);
    }
    SCOPED_TRACE(std::string(KindName(kind)) + " S=" + std::to_string(stages) +
                 " M=" + std::to_string(microbatches) + " V=" + std::to_string(chunks));
    ExpectWellFormed(Build(MakeSpec(kind, stages, microbatches, chunks)));
  }
}

// In 1F1B stage s runs min(S-s, M) forwards before its first backward: the
// warm-up plus the first steady-state forward.
TEST(ScheduleInvariants, OneFOneBInFlightForwards) {
  for (int stages = 1; stages <= 8; ++stages) {
    for (int microbatches = 1; microbatches <= 12; ++microbatches) {
      const Schedule schedule = Build(MakeSpec(Kind::k1F1B, stages, microbatches));
      for (int s = 0; s < stages; ++s) {
        int forwards = 0;
        for (int id : schedule.stage_order[s]) {
          if (schedule.nodes[id].kind == model::Kind::kBackward) break;
          ++forwards;
        }
        EXPECT_EQ(forwards, std::min(stages - s, microbatches))
            << "S=" << stages << " M=" << microbatches << " stage " << s;
      }
    }
  }
}

TEST(ScheduleInvariants, LargeShapeBuildsQuickly) {
  // 8 stages x 96 microbatches is the common case; this is 16x that.
  const Schedule schedule = Build(MakeSpec(Kind::kInterleaved, 16, 384, 4));
  EXPECT_EQ(schedule.num_nodes(), 2 * 16 * 384 * 4);
  EXPECT_EQ(static_cast<int>(schedule.topological_order.size()), schedule.num_nodes());
  for (int id = 0; id < schedule.num_nodes(); id += 97) {
    EXPECT_EQ(schedule.Find(schedule.nodes[id]), id);
  }
}

}  // namespace
}  // namespace joulepipe::schedule
