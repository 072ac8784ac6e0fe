// Copies for outputs much larger than the caches. A plain store first reads
// the destination line into the cache (read-for-ownership), so copying N
// bytes into cold memory moves 3N bytes through DRAM; non-temporal stores
// write around the cache and move 2N. The executor uses this for the final
// writes of large operations, whose outputs will not be re-read soon.
#pragma once

#include <cstddef>

namespace chorus::host {

// memcpy with non-temporal stores where the CPU supports them (AVX2 build
// path); a plain memcpy otherwise or for small sizes. No overlap allowed.
void streamCopy(void* dst, const void* src, size_t bytes);
// Orders preceding non-temporal stores before later stores (call once after
// a batch of streamCopy, before results are published to other threads).
void streamFence();

}  // namespace chorus::host
