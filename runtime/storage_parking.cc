#include "runtime/storage_parking.h"

#include <c10/core/StorageImpl.h>

namespace placer {

void FreeStorage(const torch::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

bool StorageFreed(const torch::Tensor& tensor) {
  return tensor.storage().nbytes() == 0 && tensor.numel() > 0;
}

torch::Tensor RefillStorage(const torch::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(tensor.numel()) *
                       static_cast<size_t>(tensor.element_size());
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  torch::NoGradGuard no_grad;
  return torch::empty({0}, tensor.options())
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(),
            tensor.strides());
}

bool SharesStorage(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() && b.defined() && a.has_storage() && b.has_storage() &&
         a.storage().unsafeGetStorageImpl() ==
             b.storage().unsafeGetStorageImpl();
}

bool Parkable(const torch::Tensor& tensor) {
  return tensor.defined() && tensor.has_storage() && tensor.numel() > 0 &&
         tensor.is_contiguous() && tensor.storage_offset() == 0 &&
         tensor.storage().nbytes() ==
             static_cast<size_t>(tensor.numel()) *
                 static_cast<size_t>(tensor.element_size());
}

}  // namespace placer
