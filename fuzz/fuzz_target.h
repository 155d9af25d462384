// The libFuzzer entry point every target in fuzz/ defines. Built with
// --config=fuzz (clang, -fsanitize=fuzzer,address,undefined) it is a
// coverage-guided fuzzer; built normally it links with replay_main.cc and
// replays a corpus and the crash inputs found so far, as a regression test.
//
// Contract of a target: any bytes in, no crash, no hang, no leak, and no
// exception escaping; rejected input comes back as a status, never aborts.
#ifndef PLACER_FUZZ_FUZZ_TARGET_H_
#define PLACER_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#endif  // PLACER_FUZZ_FUZZ_TARGET_H_
