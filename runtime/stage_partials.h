// StagePartials: the partial gradients one micro-batch's passes made, by
// gradient sum, by the stage that made them and by the slot of that stage
// whose nodes made them (each slot's partials of a sum added up), so that
// the executor names an entry by what it is rather than by its position.
//
// Contract: `sums` x `stages` x `slots` entries, each an undefined tensor
// until set; at() takes a sum in [0, sums), a stage in [0, stages) and a
// slot in [0, slots) (checked in debug builds only). Not thread-safe: the
// executor guards its tables with its lock.
#ifndef PLACER_RUNTIME_STAGE_PARTIALS_H_
#define PLACER_RUNTIME_STAGE_PARTIALS_H_

#include <torch/torch.h>

#include <cassert>
#include <cstddef>
#include <vector>

namespace placer {

class StagePartials {
 public:
  StagePartials() = default;
  StagePartials(int sums, int stages, int slots)
      : sums_(sums),
        stages_(stages),
        slots_(slots),
        entries_(static_cast<size_t>(sums) * stages * slots) {}

  // Stage `stage`'s partials of gradient sum `sum` made on its slot `slot`.
  torch::Tensor& at(int sum, int stage, int slot) {
    assert(sum >= 0 && sum < sums_);
    assert(stage >= 0 && stage < stages_);
    assert(slot >= 0 && slot < slots_);
    return entries_[(static_cast<size_t>(sum) * stages_ + stage) * slots_ +
                    slot];
  }

 private:
  int sums_ = 0;
  int stages_ = 0;
  int slots_ = 0;
  std::vector<torch::Tensor> entries_;
};

}  // namespace placer

#endif  // PLACER_RUNTIME_STAGE_PARTIALS_H_
