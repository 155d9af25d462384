// A tensor's storage let go while the tensor (and what holds it: a saved
// autograd graph) stays, and given back later: how the strategy executor
// frees what it can rebuild before a backward reads it (ZeRO-3's gathered
// parameters, FSDP's reshard after forward; recomputation's rerun values
// a kept op saved, as selective checkpointing drops them).
//
// Contract: FreeStorage releases `tensor`'s bytes (the tensor and every
// view of it keep their sizes and must read nothing until RefillStorage);
// StorageFreed says whether they are released. RefillStorage allocates
// them again from the storage's allocator (contents undefined) and returns
// an alias of `tensor` on them with a version counter of its own: written
// through, the saved graphs holding `tensor` still accept it. Parkable:
// whether `tensor` spans its storage, contiguous from its start, so that
// refilling it gives back all of it (whoever else shares the storage,
// which the caller knows to be no value still in use). Not thread-safe
// for one tensor.
#ifndef PLACER_RUNTIME_STORAGE_PARKING_H_
#define PLACER_RUNTIME_STORAGE_PARKING_H_

#include <torch/torch.h>

namespace placer {

void FreeStorage(const torch::Tensor& tensor);
bool StorageFreed(const torch::Tensor& tensor);
torch::Tensor RefillStorage(const torch::Tensor& tensor);
bool SharesStorage(const torch::Tensor& a, const torch::Tensor& b);
bool Parkable(const torch::Tensor& tensor);

}  // namespace placer

#endif  // PLACER_RUNTIME_STORAGE_PARKING_H_
