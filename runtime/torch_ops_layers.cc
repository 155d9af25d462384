// Kernels of network layers: convolution and pooling, batch and layer
// normalization, the recurrent cells (LSTM, GRU, RNN), activations with
// parameters, softmax and the cross-entropy loss, dropout.
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/torch_kernel.h"

namespace placer::kernels {
namespace {

// Symmetric pads as torch wants them, or empty when ONNX's are not.
std::optional<std::vector<int64_t>> SymmetricPads(const Op& op, size_t dims) {
  std::vector<int64_t> pads = op.IntsAttribute("pads");
  if (pads.empty()) return std::vector<int64_t>(dims, 0);
  if (pads.size() != 2 * dims) return std::nullopt;
  for (size_t i = 0; i < dims; ++i) {
    if (pads[i] != pads[i + dims]) return std::nullopt;
  }
  return std::vector<int64_t>(pads.begin(), pads.begin() + dims);
}

std::vector<int64_t> OrOnes(std::vector<int64_t> v, size_t dims) {
  return v.empty() ? std::vector<int64_t>(dims, 1) : v;
}

Result Conv(const Op& op, const Tensors& in) {
  size_t dims = in[1].dim() - 2;
  auto pads = SymmetricPads(op, dims);
  if (!pads) return Unsupported(op, "asymmetric pads");
  const AttributeValue* auto_pad = op.FindAttribute("auto_pad");
  if (auto_pad != nullptr && auto_pad->s != "NOTSET") {
    return Unsupported(op, "auto_pad " + auto_pad->s);
  }
  torch::Tensor bias = Present(in, 2) ? in[2] : torch::Tensor();
  return Tensors{torch::convolution(
      in[0], in[1], bias, OrOnes(op.IntsAttribute("strides"), dims), *pads,
      OrOnes(op.IntsAttribute("dilations"), dims), false,
      std::vector<int64_t>(dims, 0), op.IntAttribute("group", 1))};
}

// ONNX's mode: opset 14+ says training_mode (default 0, inference); opsets
// 9-13 train when the node has more than one output. Training normalizes by
// the batch statistics and updates the running mean and variance in place
// (ONNX's momentum m: running = m * running + (1 - m) * batch; the variance
// folded in is the unbiased one, as PyTorch's BatchNorm does), which is how
// the executor keeps them as state from step to step; inference normalizes
// by the running statistics. Outputs: Y, then the updated running mean and
// variance, then the batch mean and (biased) variance, as many as the node
// names.
Result BatchNormalization(const Op& op, const Tensors& in) {
  const AttributeValue* eps = op.FindAttribute("epsilon");
  const AttributeValue* momentum = op.FindAttribute("momentum");
  const AttributeValue* mode = op.FindAttribute("training_mode");
  const bool training = mode != nullptr ? mode->i != 0 : op.outputs.size() > 1;
  const double epsilon = eps != nullptr ? eps->f : 1e-5;
  if (!training) {
    return Tensors{torch::batch_norm(in[0], in[1], in[2], in[3], in[4],
                                     /*training=*/false, 0.0, epsilon,
                                     /*cudnn_enabled=*/false)};
  }
  torch::Tensor y, batch_mean, invstd;
  std::tie(y, batch_mean, invstd) = torch::native_batch_norm(
      in[0], in[1], in[2], in[3], in[4], /*training=*/true,
      momentum != nullptr ? 1.0 - momentum->f : 0.1, epsilon);
  Tensors out{y};
  if (op.outputs.size() > 1) out.push_back(in[3].detach().clone());
  if (op.outputs.size() > 2) out.push_back(in[4].detach().clone());
  if (op.outputs.size() > 3) out.push_back(batch_mean.detach());
  if (op.outputs.size() > 4) {
    out.push_back((invstd.detach().pow(-2) - epsilon).clamp_min(0));
  }
  return out;
}

// Fused recurrent layers (ONNX LSTM, GRU, RNN) on LibTorch's cuDNN-style
// kernels. ONNX stacks gates as LSTM i,o,f,c and GRU z,r,h; LibTorch wants
// i,f,g,o and r,z,n, so W, R and B are reordered (differentiably: the
// gradients land on the ONNX tensors). X is [T,B,I] (layout 0) or [B,T,I]
// (layout 1); Y is [T,D,B,H] or [B,T,D,H]; Y_h and Y_c are [D,B,H] or
// [B,D,H]. "reverse" runs the forward kernel over the time-flipped input.
// Unsupported, and said so: peepholes, clip, input_forget, non-default
// activations, GRU with linear_before_reset=0 (PyTorch's GRU is 1), and
// sequence_lens shorter than T.
enum class Cell { kLstm, kGru, kRnnTanh, kRnnRelu };

torch::Tensor ReorderGates(const torch::Tensor& w, int64_t hidden,
                           const std::vector<int64_t>& order) {
  std::vector<torch::Tensor> chunks;
  for (int64_t g : order) chunks.push_back(w.narrow(0, g * hidden, hidden));
  return torch::cat(chunks, 0);
}

Result Recurrent(const Op& op, const Tensors& in) {
  const int64_t hidden = op.IntAttribute("hidden_size", 0);
  if (hidden <= 0) return Unsupported(op, "hidden_size missing");
  const AttributeValue* dir_attr = op.FindAttribute("direction");
  const std::string direction = dir_attr != nullptr ? dir_attr->s : "forward";
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional") {
    return Unsupported(op, "direction " + direction);
  }
  if (op.FindAttribute("clip") != nullptr) return Unsupported(op, "clip");
  if (op.IntAttribute("input_forget", 0) != 0) {
    return Unsupported(op, "input_forget");
  }
  Cell cell = op.op_type == "LSTM"  ? Cell::kLstm
              : op.op_type == "GRU" ? Cell::kGru
                                    : Cell::kRnnTanh;
  std::vector<std::string> defaults =
      cell == Cell::kLstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
      : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                           : std::vector<std::string>{"Tanh"};
  if (const AttributeValue* a = op.FindAttribute("activations")) {
    for (size_t k = 0; k < a->strings.size(); ++k) {
      const std::string& want = defaults[k % defaults.size()];
      if (cell == Cell::kRnnTanh && a->strings[k] == "Relu") {
        cell = Cell::kRnnRelu;
        continue;
      }
      if (a->strings[k] != want) {
        return Unsupported(op, "activation " + a->strings[k]);
      }
    }
  }
  if (cell == Cell::kGru && op.IntAttribute("linear_before_reset", 0) == 0) {
    return Unsupported(op, "linear_before_reset=0 (PyTorch's GRU is 1)");
  }
  if (cell == Cell::kLstm && Present(in, 7))
    return Unsupported(op, "peepholes");
  const bool batch_first = op.IntAttribute("layout", 0) == 1;
  torch::Tensor x = in[0];
  const int64_t steps = x.size(batch_first ? 1 : 0);
  const int64_t batch = x.size(batch_first ? 0 : 1);
  if (Present(in, 4)) {
    std::vector<int64_t> lens = IntsOf(in[4]);
    for (int64_t l : lens) {
      if (l != steps) return Unsupported(op, "sequence_lens shorter than T");
    }
  }
  const int64_t dirs = in[1].size(0);
  const int gates = cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1;
  const std::vector<int64_t> order =
      cell == Cell::kLstm  ? std::vector<int64_t>{0, 2, 3, 1}
      : cell == Cell::kGru ? std::vector<int64_t>{1, 0, 2}
                           : std::vector<int64_t>{0};
  std::vector<torch::Tensor> params;
  for (int64_t d = 0; d < dirs; ++d) {
    params.push_back(ReorderGates(in[1][d], hidden, order));
    params.push_back(ReorderGates(in[2][d], hidden, order));
    if (Present(in, 3)) {
      params.push_back(
          ReorderGates(in[3][d].narrow(0, 0, gates * hidden), hidden, order));
      params.push_back(ReorderGates(
          in[3][d].narrow(0, gates * hidden, gates * hidden), hidden, order));
    } else {
      params.push_back(torch::zeros({gates * hidden}, in[1].options()));
      params.push_back(torch::zeros({gates * hidden}, in[1].options()));
    }
  }
  auto initial = [&](size_t k) {
    if (!Present(in, k)) {
      return torch::zeros({dirs, batch, hidden}, x.options());
    }
    return batch_first ? in[k].transpose(0, 1).contiguous() : in[k];
  };
  torch::Tensor h0 = initial(5);
  const bool reverse = direction == "reverse";
  const int time_dim = batch_first ? 1 : 0;
  if (reverse) x = x.flip(time_dim);
  const bool bidirectional = direction == "bidirectional";
  torch::Tensor y, h_n, c_n;
  if (cell == Cell::kLstm) {
    std::tie(y, h_n, c_n) = torch::lstm(x, {h0, initial(6)}, params, true, 1,
                                        0.0, true, bidirectional, batch_first);
  } else if (cell == Cell::kGru) {
    std::tie(y, h_n) = torch::gru(x, h0, params, true, 1, 0.0, true,
                                  bidirectional, batch_first);
  } else if (cell == Cell::kRnnTanh) {
    std::tie(y, h_n) = torch::rnn_tanh(x, h0, params, true, 1, 0.0, true,
                                       bidirectional, batch_first);
  } else {
    std::tie(y, h_n) = torch::rnn_relu(x, h0, params, true, 1, 0.0, true,
                                       bidirectional, batch_first);
  }
  if (reverse) y = y.flip(time_dim);
  // [T,B,D*H] -> [T,D,B,H]; batch first: [B,T,D*H] -> [B,T,D,H].
  y = batch_first
          ? y.reshape({batch, steps, dirs, hidden})
          : y.reshape({steps, batch, dirs, hidden}).permute({0, 2, 1, 3});
  auto state = [&](const torch::Tensor& s) {
    return batch_first ? s.transpose(0, 1) : s;
  };
  Tensors out{y, state(h_n)};
  if (cell == Cell::kLstm) out.push_back(state(c_n));
  while (out.size() > op.outputs.size()) out.pop_back();
  return out;
}

Result Gelu(const Op& op, const Tensors& in) {
  const AttributeValue* a = op.FindAttribute("approximate");
  return Tensors{torch::gelu(in[0], a != nullptr ? a->s : "none")};
}

Result HardSigmoid(const Op& op, const Tensors& in) {
  const AttributeValue* alpha = op.FindAttribute("alpha");
  const AttributeValue* beta = op.FindAttribute("beta");
  return Tensors{torch::clamp(in[0] * (alpha != nullptr ? alpha->f : 0.2) +
                                  (beta != nullptr ? beta->f : 0.5),
                              0.0, 1.0)};
}

Result HardSwish(const Op&, const Tensors& in) {
  return Tensors{torch::hardswish(in[0])};
}

Result LayerNormalization(const Op& op, const Tensors& in) {
  int64_t axis = Axis(op.IntAttribute("axis", -1), in[0].dim());
  std::vector<int64_t> shape(in[0].sizes().begin() + axis, in[0].sizes().end());
  const AttributeValue* eps = op.FindAttribute("epsilon");
  torch::Tensor bias = Present(in, 2) ? in[2] : torch::Tensor();
  return Tensors{torch::layer_norm(in[0], shape, in[1], bias,
                                   eps != nullptr ? eps->f : 1e-5)};
}

Result Pool(const Op& op, const Tensors& in, bool max) {
  std::vector<int64_t> kernel = op.IntsAttribute("kernel_shape");
  size_t dims = kernel.size();
  auto pads = SymmetricPads(op, dims);
  if (!pads) return Unsupported(op, "asymmetric pads");
  std::vector<int64_t> strides = OrOnes(op.IntsAttribute("strides"), dims);
  bool ceil = op.IntAttribute("ceil_mode", 0) != 0;
  if (dims != 2) return Unsupported(op, "pooling other than 2-D");
  if (max) {
    return Tensors{
        torch::max_pool2d(in[0], kernel, strides, *pads,
                          OrOnes(op.IntsAttribute("dilations"), dims), ceil)};
  }
  return Tensors{
      torch::avg_pool2d(in[0], kernel, strides, *pads, ceil,
                        op.IntAttribute("count_include_pad", 0) != 0)};
}

Result MaxPool(const Op& op, const Tensors& in) { return Pool(op, in, true); }

Result AveragePool(const Op& op, const Tensors& in) {
  return Pool(op, in, false);
}

// adaptive_avg_pool2d to 1 x 1 is a mean over the spatial dims; as the
// sum over their count (ReduceMean's kernel) autograd keeps only sizes.
Result GlobalAveragePool(const Op&, const Tensors& in) {
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int64_t d = 2; d < in[0].dim(); ++d) {
    dims.push_back(d);
    count *= in[0].size(d);
  }
  return Tensors{in[0].sum(dims, /*keepdim=*/true) /
                 static_cast<double>(count)};
}

Result Softmax(const Op& op, const Tensors& in) {
  return Tensors{
      torch::softmax(in[0], Axis(op.IntAttribute("axis", -1), in[0].dim()))};
}

Result LogSoftmax(const Op& op, const Tensors& in) {
  return Tensors{torch::log_softmax(
      in[0], Axis(op.IntAttribute("axis", -1), in[0].dim()))};
}

torch::Tensor MeanCrossEntropy(const torch::Tensor& logits,
                               const torch::Tensor& labels,
                               int64_t ignore_index) {
  return torch::nll_loss_nd(torch::log_softmax(logits, 1),
                            labels.to(torch::kLong), {}, at::Reduction::Mean,
                            ignore_index);
}

// Mean cross-entropy whose backward keeps the logits and labels (what the
// training view says SoftmaxCrossEntropyLoss keeps) and writes the
// gradient, (softmax - one-hot) x g / (labels not ignored), into one
// logits-sized buffer: the backward holds what the view counts (the
// logits and the gradient), not a log-softmax and its gradient beside them.
struct CrossEntropyKeepingLogits
    : public torch::autograd::Function<CrossEntropyKeepingLogits> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               torch::Tensor logits, torch::Tensor labels,
                               int64_t ignore_index) {
    ctx->save_for_backward({logits, labels});
    ctx->saved_data["ignore_index"] = ignore_index;
    return MeanCrossEntropy(logits, labels, ignore_index);
  }
  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    const int64_t ignore_index = ctx->saved_data["ignore_index"].toInt();
    torch::Tensor labels = saved[1].to(torch::kLong);
    torch::Tensor valid = labels != ignore_index;
    torch::Tensor at = labels.masked_fill(~valid, 0).unsqueeze(1);
    torch::Tensor g = torch::softmax(saved[0], 1);
    g.scatter_(1, at, g.gather(1, at) - 1);
    g.mul_(valid.unsqueeze(1));
    g.mul_(grads[0] / valid.sum());
    return {g, torch::Tensor(), torch::Tensor()};
  }
};

Result SoftmaxCrossEntropyLoss(const Op& op, const Tensors& in) {
  const AttributeValue* reduction = op.FindAttribute("reduction");
  if (reduction != nullptr && reduction->s != "mean") {
    return Unsupported(op, "reduction " + reduction->s);
  }
  if (Present(in, 2)) return Unsupported(op, "class weights");
  const int64_t ignore_index = op.IntAttribute("ignore_index", -100);
  if (op.outputs.size() < 2 && in[0].requires_grad()) {
    return Tensors{
        CrossEntropyKeepingLogits::apply(in[0], in[1], ignore_index)};
  }
  torch::Tensor log_prob = torch::log_softmax(in[0], 1);
  torch::Tensor loss = torch::nll_loss_nd(log_prob, in[1].to(torch::kLong), {},
                                          at::Reduction::Mean, ignore_index);
  Tensors out{loss};
  if (op.outputs.size() > 1) out.push_back(log_prob);
  return out;
}

Result Dropout(const Op& op, const Tensors& in) {
  const AttributeValue* ratio = op.FindAttribute("ratio");
  double p = Present(in, 1) ? in[1].item<double>()
                            : (ratio != nullptr ? ratio->f : 0.5);
  bool training = Present(in, 2) && in[2].item<bool>();
  if (!training) {
    return Tensors{in[0], torch::ones_like(in[0], torch::kBool)};
  }
  // PyTorch's training-mode dropout: its backward keeps the bool mask.
  auto [y, mask] = torch::native_dropout(in[0], p, true);
  return Tensors{y, mask};
}

}  // namespace

void AddLayerKernels(KernelTable& table) {
  table["Conv"] = Conv;
  table["BatchNormalization"] = BatchNormalization;
  table["LayerNormalization"] = LayerNormalization;
  table["Gelu"] = Gelu;
  table["HardSigmoid"] = HardSigmoid;
  table["HardSwish"] = HardSwish;
  table["MaxPool"] = MaxPool;
  table["AveragePool"] = AveragePool;
  table["GlobalAveragePool"] = GlobalAveragePool;
  table["Softmax"] = Softmax;
  table["LogSoftmax"] = LogSoftmax;
  table["SoftmaxCrossEntropyLoss"] = SoftmaxCrossEntropyLoss;
  table["Dropout"] = Dropout;
  table["LSTM"] = Recurrent;
  table["GRU"] = Recurrent;
  table["RNN"] = Recurrent;
}

}  // namespace placer::kernels
