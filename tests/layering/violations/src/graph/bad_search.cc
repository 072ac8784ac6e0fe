// Fixture (not compiled): includes a CUDA header directly.
#include <cuda_runtime.h>
