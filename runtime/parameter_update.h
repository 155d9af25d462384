// ParameterUpdate: what an update node does to its parameter — the step's
// optimizer (graph/training_view.h's Optimizer) as LibTorch's torch::optim
// implements it, so a run trains as a PyTorch loop with that optimizer
// would, and the executor and the profiler update the same way.
//
// Contract:
//  - kSgd: torch::optim::SGD (w -= lr g). kMomentum: SGD with momentum
//    (v = mu v + g; w -= lr v; dampening 0). kAdam: torch::optim::AdamW
//    (betas 0.9 and 0.999, eps 1e-8, decoupled weight decay
//    UpdateHyperparameters::weight_decay), its two state tensors in the
//    weight's type.
//  - Apply updates the weight in place (the tensor given at construction
//    and every tensor sharing its storage) from `gradient` (its shape and
//    device, any floating type: it is cast to the weight's) and keeps no
//    reference to the gradient. The state is made at construction (zeros,
//    as torch::optim makes it at its first step, so every step's memory is
//    the same): TrainingOptions::optimizer_state_per_parameter_byte times
//    the weight's bytes.
//  - Not thread-safe: one thread applies to one parameter at a time.
#ifndef PLACER_RUNTIME_PARAMETER_UPDATE_H_
#define PLACER_RUNTIME_PARAMETER_UPDATE_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "graph/training_view.h"

namespace placer {

struct UpdateHyperparameters {
  double learning_rate = 0.01;
  double momentum = 0.9;       // kMomentum
  double weight_decay = 0.01;  // kAdam (torch.optim.AdamW's default)
};

class ParameterUpdate {
 public:
  ParameterUpdate(Optimizer optimizer, const UpdateHyperparameters& hyper,
                  torch::Tensor weight);
  ParameterUpdate(ParameterUpdate&&) = default;
  ParameterUpdate& operator=(ParameterUpdate&&) = default;

  void Apply(const torch::Tensor& gradient);

 private:
  torch::Tensor weight_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_PARAMETER_UPDATE_H_
