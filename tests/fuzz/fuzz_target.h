// What every fuzz target in tests/fuzz/ provides: the libFuzzer entry point
// and a few valid inputs to start from (the portable driver mutates them;
// `--write-seeds DIR` writes them as a libFuzzer corpus).
//
// A target feeds the bytes to a parser of network input and checks what it
// accepted; a violated expectation calls fuzzCheck, which aborts, so both
// libFuzzer and the portable driver report it as a crash with its input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace chorus::fuzz {

using Bytes = std::vector<uint8_t>;

// Valid inputs of this target's format.
std::vector<Bytes> seeds();

inline void fuzzCheck(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: expectation violated: %s\n", what);
  std::abort();
}

}  // namespace chorus::fuzz
