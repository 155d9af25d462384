// The zoo's Llama decoder at the size the memory tests run it: 2 layers,
// 256 wide (4 heads, 2 of them key/value), SwiGLU 688, 8 x 64 tokens,
// vocabulary 2,000.
#ifndef PLACER_TESTS_RUNTIME_SMALL_LLAMA_H_
#define PLACER_TESTS_RUNTIME_SMALL_LLAMA_H_

#include "zoo/zoo.h"

namespace placer {

inline zoo::ZooParams SmallLlama() {
  zoo::ZooParams p;
  p.layers = 2;
  p.hidden = 256;
  p.heads = 4;
  p.kv_heads = 2;
  p.ffn = 688;
  p.seq_len = 64;
  p.vocab = 2000;
  p.batch_size = 8;
  return p;
}

}  // namespace placer

#endif  // PLACER_TESTS_RUNTIME_SMALL_LLAMA_H_
