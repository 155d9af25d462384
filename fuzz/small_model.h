// The fixed model that targets with a model-shaped context run against: a
// GNMT-2 of batch 2, hidden 8, 2 steps, vocabulary 10, weights stripped
// (a few hundred ops: fast per execution, every op kind of the zoo's
// sequence models).
#ifndef PLACER_FUZZ_SMALL_MODEL_H_
#define PLACER_FUZZ_SMALL_MODEL_H_

#include "graph/graph.h"
#include "graph/onnx_import.h"
#include "zoo/zoo.h"

namespace placer::fuzz {

inline Graph SmallGnmt2() {
  zoo::ZooParams p;
  p.batch_size = 2;
  p.hidden = 8;
  p.seq_len = 2;
  p.vocab = 10;
  p.weights = false;
  return *ImportOnnxModel(*zoo::BuildZooModel("gnmt2", p), "gnmt2", {});
}

}  // namespace placer::fuzz

#endif  // PLACER_FUZZ_SMALL_MODEL_H_
