// What an op's backward reads from its forward pass, as PyTorch's derivative
// formulas (tools/autograd/derivatives.yaml) save it for the kernels the
// executor runs (runtime/torch_ops.cc): so the training view keeps exactly
// those tensors alive until the backward, and frees the rest after their
// last forward reader, as a framework does.
//
// Contract:
//  - SavedForBackward(op) lists the input and output positions of `op`
//    whose tensors its backward reads. Everything else the backward needs
//    is a size.
//  - Shape and data-movement ops (Add, Concat, Reshape, Slice, ...) keep
//    nothing; activations whose derivative is written in terms of their
//    result (Relu, Sigmoid, Tanh, Exp, Sqrt, Reciprocal, Softmax,
//    LogSoftmax) keep their output; Gather keeps its indices, Where its
//    condition; Dropout its mask (its second output, a byte per element;
//    its input when the op has no mask output).
//  - Any other op type, including ones in other domains and types this
//    table does not know, keeps every input: an over-count of memory, never
//    an under-count.
#ifndef PLACER_GRAPH_SAVED_FOR_BACKWARD_H_
#define PLACER_GRAPH_SAVED_FOR_BACKWARD_H_

#include <vector>

#include "graph/graph.h"

namespace placer {

struct SavedTensors {
  std::vector<int> inputs;   // positions in op.inputs, ascending
  std::vector<int> outputs;  // positions in op.outputs, ascending
};

SavedTensors SavedForBackward(const Op& op);

}  // namespace placer

#endif  // PLACER_GRAPH_SAVED_FOR_BACKWARD_H_
