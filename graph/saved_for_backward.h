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
//  - Shape and data-movement ops (Add, Concat, Reshape, Slice, Resize,
//    ...) keep nothing; activations whose derivative is written in terms of
//    their result (Relu, Sigmoid, Tanh, Exp, Sqrt, Reciprocal, Softmax,
//    LogSoftmax) keep their output; Gather and ScatterElements keep their
//    indices, Where its condition; Conv and ConvTranspose their input and
//    weight, BatchNormalization every input but its bias; Dropout its mask
//    (its second output, a byte per element; its input when the op has no
//    mask output).
//  - A FusedElementwise op (fused_region.h) keeps, of its inputs and
//    outputs, those from which the tensors its body's backward reads are
//    recomputed: such a tensor the op reads or writes is kept as it is, one
//    between its ops is recomputed from what its producer reads, in turn
//    (a Mul inside keeps an operand only for the other one's gradient);
//    and its constant and integer or bool inputs, which the recomputation
//    needs for shapes and selections.
//  - A fused recurrent layer (LSTM, GRU, RNN) keeps X, sequence_lens and
//    its initial states, not W, R and B: its kernels read the
//    gate-reordered copies of those (SavedWorkspaceBytes), which is all
//    autograd keeps of them.
//  - Any other op type, including ones in other domains and types this
//    table does not know, keeps every input: an over-count of memory, never
//    an under-count.
//  - SavedForBackward(op, needs_gradient) (one flag per op input: whether
//    the backward writes that input's gradient) keeps only what the wanted
//    gradients read, as PyTorch's autograd saves a tensor only for the
//    derivative formulas of inputs that need one: a product (Mul, MatMul,
//    Gemm's A and B) keeps each operand only for the other's gradient, so
//    a scale by a constant keeps the constant and not the scores; Div keeps
//    its divisor for either gradient and its dividend only for the
//    divisor's. Every other op as SavedForBackward(op), which is this with
//    every input needing a gradient.
//  - SavedWorkspaceBytes(op, tensors): what the op's backward keeps that is
//    neither an input nor an output of the op — the per-step state of a
//    fused recurrent layer (ONNX LSTM, GRU, RNN), which the kernels the
//    executor runs (torch::lstm / gru / rnn_tanh on LibTorch's cells,
//    aten/src/ATen/native/RNN.cpp) save at every step. Per step, direction
//    and batch row, in units of hidden_size elements: LSTM 7 (the four
//    gates in place, h_t, c_t and tanh(c_t)); GRU 7 (the three hidden
//    gates in place, the new gate, h_(t-1), and the copies autograd keeps
//    of the two tensors multiplied in place); RNN 2 (its activation and
//    h_(t-1)); less, per initial state given as an input (initial_h, an
//    LSTM's initial_c), one step's state, which the first step reads from
//    that input; plus the gate-reordered copies of W and R the executor
//    feeds the kernels (runtime/torch_ops.cc), which their matmuls keep.
//    A FusedAttention op (graph/fused_attention.h) keeps its inputs, its
//    output and one fp32 log-sum-exp per query row (FlashAttention's).
//    A normalization keeps its statistics, a mean and an inverse standard
//    deviation at float precision (double for double inputs): per channel
//    for BatchNormalization in training mode, per (sample, channel) for
//    InstanceNormalization (and its scale repeated per sample), per row (the
//    dims before `axis`) for LayerNormalization. MaxPool keeps its argmax, an
//    int64 per output element. 0 for every other op, and when the shapes are
//    unknown.
//  - ForwardScratchBytes(op, tensors): what the op's forward allocates and
//    frees before it ends, when that is more than its steps' share: a fused
//    recurrent layer's input projections for every step of a direction,
//    [T, B, gates x hidden] (LibTorch computes them at once, then steps),
//    and when bidirectional each direction's outputs [T, B, hidden] before
//    they are joined.
//    0 for every other op.
#ifndef PLACER_GRAPH_SAVED_FOR_BACKWARD_H_
#define PLACER_GRAPH_SAVED_FOR_BACKWARD_H_

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace placer {

struct SavedTensors {
  std::vector<int> inputs;   // positions in op.inputs, ascending
  std::vector<int> outputs;  // positions in op.outputs, ascending
};

SavedTensors SavedForBackward(const Op& op);
SavedTensors SavedForBackward(const Op& op,
                              const std::vector<bool>& needs_gradient);

int64_t SavedWorkspaceBytes(const Op& op, const std::vector<Tensor>& tensors);
int64_t ForwardScratchBytes(const Op& op, const std::vector<Tensor>& tensors);

}  // namespace placer

#endif  // PLACER_GRAPH_SAVED_FOR_BACKWARD_H_
