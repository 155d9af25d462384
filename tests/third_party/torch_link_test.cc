#include <torch/torch.h>

#include "gtest/gtest.h"

namespace {

TEST(TorchLinkTest, MatmulAndAutograd) {
  torch::Tensor a = torch::ones({2, 3}, torch::requires_grad());
  torch::Tensor b = torch::full({3, 2}, 2.0);
  torch::Tensor loss = torch::matmul(a, b).sum();
  loss.backward();
  EXPECT_DOUBLE_EQ(loss.item<double>(), 24.0);
  EXPECT_DOUBLE_EQ(a.grad().sum().item<double>(), 24.0);
}

}  // namespace
