#include "runtime/parameter_update.h"

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace placer {
namespace {

// The key torch::optim files a parameter's state under: its TensorImpl's
// address, printed (LibTorch 1.x) or as a pointer (LibTorch 2.x).
template <typename StateMap>
typename StateMap::key_type StateKey(const torch::Tensor& weight) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream key;
    key << weight.unsafeGetTensorImpl();
    return key.str();
  } else {
    return weight.unsafeGetTensorImpl();
  }
}

}  // namespace

ParameterUpdate::ParameterUpdate(Optimizer optimizer,
                                 const UpdateHyperparameters& hyper,
                                 torch::Tensor weight)
    : weight_(std::move(weight)) {
  std::vector<torch::Tensor> parameters = {weight_};
  // The state torch::optim would make at the first step, made now (the
  // key is the one its step looks up): a step's memory is then the same
  // from the first step on, as the simulator counts it.
  using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
  const auto key = StateKey<StateMap>(weight_);
  switch (optimizer) {
    case Optimizer::kSgd:
      optimizer_ = std::make_unique<torch::optim::SGD>(
          parameters, torch::optim::SGDOptions(hyper.learning_rate));
      break;
    case Optimizer::kMomentum:
      optimizer_ = std::make_unique<torch::optim::SGD>(
          parameters, torch::optim::SGDOptions(hyper.learning_rate)
                          .momentum(hyper.momentum));
      {
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(torch::zeros_like(weight_));
        optimizer_->state()[key] = std::move(state);
      }
      break;
    case Optimizer::kAdam:
      optimizer_ = std::make_unique<torch::optim::AdamW>(
          parameters, torch::optim::AdamWOptions(hyper.learning_rate)
                          .weight_decay(hyper.weight_decay));
      {
        auto state = std::make_unique<torch::optim::AdamWParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(weight_));
        state->exp_avg_sq(torch::zeros_like(weight_));
        optimizer_->state()[key] = std::move(state);
      }
      break;
  }
}

void ParameterUpdate::Apply(const torch::Tensor& gradient) {
  torch::NoGradGuard no_grad;
  weight_.mutable_grad() = gradient.to(weight_.scalar_type());
  optimizer_->step();
  weight_.mutable_grad() = torch::Tensor();
}

}  // namespace placer
