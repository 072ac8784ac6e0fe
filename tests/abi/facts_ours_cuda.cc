// Facts of our public headers when the CUDA runtime headers are on the include
// path: nccl.h then takes cudaStream_t from CUDA instead of declaring it.
#include "nccl.h"
#include "chorus/nccl_device_host.h"

#ifndef CHORUS_HAVE_CUDA_HEADERS
#error "this TU must be compiled with the CUDA include directory"
#endif

#define CHORUS_ABI_FACTS_FN oursFactsWithCuda
#define CHORUS_ABI_DEVICE 1
#include "abi/abi_facts.inc"
