// The strategy simulator's hand-computed cases share this model: a chain
// of four MatMuls, each with its own weight,
//   x -> A(w1) -> B(w2) -> C(w3) -> D(w4) -> output,  every tensor [4, 4]
// (64 bytes); one op per stage gives four equal stages.
#ifndef PLACER_TESTS_SIMULATOR_FOUR_MATMUL_CHAIN_H_
#define PLACER_TESTS_SIMULATOR_FOUR_MATMUL_CHAIN_H_

#include <string>
#include <utility>

#include "graph/onnx_import.h"
#include "gtest/gtest.h"
#include "simulator/strategy.h"
#include "tests/graph/test_models.h"
#include "tests/simulator/constant_costs.h"

namespace placer::testing {

inline Graph FourMatMulChain() {
  onnx::ModelProto m = EmptyModel();
  auto* g = m.mutable_graph();
  AddInput(g, "x", {4, 4});
  const char* ops[] = {"A", "B", "C", "D"};
  std::string in = "x";
  for (int i = 0; i < 4; ++i) {
    std::string w = "w" + std::to_string(i + 1);
    std::string out = std::string(1, static_cast<char>('a' + i));
    AddWeight(g, w, {4, 4});
    AddNode(g, "MatMul", ops[i], {in, w}, {out});
    in = out;
  }
  AddOutput(g, in);
  absl::StatusOr<Graph> graph = ImportOnnxModel(m, "chain", {});
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

// Four stages, one op and one device each.
inline Strategy FourStages(int micro_batches, PipelineSchedule schedule) {
  Strategy s;
  s.stage_of_op = {0, 1, 2, 3};
  s.stages = {PipelineStage::OneDevicePerReplica({0}),
              PipelineStage::OneDevicePerReplica({1}),
              PipelineStage::OneDevicePerReplica({2}),
              PipelineStage::OneDevicePerReplica({3})};
  s.micro_batches = micro_batches;
  s.schedule = schedule;
  return s;
}

// The chain on `devices` flat devices.
struct ChainFixture : ExactFixture {
  explicit ChainFixture(const ConstantCosts& c, int devices = 4)
      : ExactFixture(FourMatMulChain(), c, devices) {}
};

}  // namespace placer::testing

#endif  // PLACER_TESTS_SIMULATOR_FOUR_MATMUL_CHAIN_H_
