// StableHash: FNV-1a (64-bit) of a string. Unlike absl::Hash or std::hash
// it is the same in every process, build and machine, so what it seeds
// (zoo weights, the hash policy's placement) is reproducible.
#ifndef PLACER_BASE_STABLE_HASH_H_
#define PLACER_BASE_STABLE_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace placer {

inline uint64_t StableHash(absl::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace placer

#endif  // PLACER_BASE_STABLE_HASH_H_
