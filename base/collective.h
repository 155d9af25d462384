// What a collective over a group of devices does: the one vocabulary the
// data-parallel exchange, ZeRO and tensor parallelism (graph/
// tensor_sharding.h) use, costed in simulator/allreduce.h and run through
// c10d by the executor.
#ifndef PLACER_BASE_COLLECTIVE_H_
#define PLACER_BASE_COLLECTIVE_H_

namespace placer {

enum class Collective {
  kAllreduce,      // every device ends with the sum of everyone's tensor
  kReduceScatter,  // every device ends with the sum of its 1/p of it
  kAllGather,      // every device ends with everyone's 1/p: the whole
  kAllToAll,       // every device swaps its 1/p of a split for another one
};

}  // namespace placer

#endif  // PLACER_BASE_COLLECTIVE_H_
