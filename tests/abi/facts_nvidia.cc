// Facts of NVIDIA's NCCL headers (nccl.h and the device API's nccl_device.h),
// compiled as host C++ against the CUDA toolkit's include directory.
#include <nccl.h>
#include <nccl_device.h>

#if NCCL_VERSION_CODE != 22809
#error "the ABI reference must be NCCL 2.28.9 (tests/abi/CMakeLists.txt checks this before building)"
#endif

#define CHORUS_ABI_FACTS_FN nvidiaFacts
#define CHORUS_ABI_DEVICE 1
#define CHORUS_ABI_TEAM_OVERLOADS 1
#include "abi/abi_facts.inc"
