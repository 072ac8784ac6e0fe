# Chooses the GPU architectures the CUDA kernels are compiled for, before
# enable_language(CUDA). An explicit choice always wins: -DCMAKE_CUDA_ARCHITECTURES=...
# (kept in the cache, so it holds for later configures of the same build
# folder) or the CUDAARCHS environment variable (CMake's own convention).
# Otherwise, every configure decides again:
# - GPUs visible (nvidia-smi --query-gpu=compute_cap): machine code for each
#   of their architectures plus PTX of the newest, e.g. 90-real;90-virtual
#   on an H100/H200, 80-real;80-virtual on an A100;
# - no GPU, no driver, or an nvidia-smi too old for compute_cap: sm_80 and
#   sm_90 machine code plus compute_90 PTX (A100, H100/H200, and later GPUs
#   through the driver's JIT compiler).
# A GPU the CUDA compiler cannot build for (nvcc --list-gpu-arch) gets, with
# a warning, PTX of the newest older architecture it can build (a GPU newer
# than the toolkit runs it through the driver's JIT compiler). The choice is
# printed in the configure output.

set(CHORUS_CUDA_DEFAULT_ARCHS 80 90) # without a visible GPU; PTX of the last

# The architectures nvcc can compile for, as numbers (75;80;...), into OUT;
# empty when the compiler does not say (not nvcc, or an old one).
function(_chorus_cuda_compiler_archs out)
  set(archs "")
  if(CMAKE_CUDA_COMPILER)
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch RESULT_VARIABLE rc OUTPUT_VARIABLE text
                    ERROR_QUIET TIMEOUT 30)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "compute_[0-9]+" found "${text}")
      foreach(f IN LISTS found)
        string(REPLACE "compute_" "" n "${f}")
        list(APPEND archs ${n})
      endforeach()
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

# Compute capabilities of the visible GPUs as architecture numbers (9.0 -> 90),
# without repeats, into OUT; empty when nvidia-smi is missing or fails.
function(_chorus_visible_gpu_archs out)
  set(archs "")
  find_program(_chorus_nvidia_smi nvidia-smi NO_CACHE)
  if(_chorus_nvidia_smi)
    execute_process(COMMAND "${_chorus_nvidia_smi}" --query-gpu=compute_cap --format=csv,noheader
                    RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_QUIET TIMEOUT 30)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${text}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" n "${cap}")
        list(APPEND archs ${n})
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

# Keeps the architectures of WANTED that the compiler (SUPPORTED; empty:
# unknown, keep all) can build, into OUT_REAL. For one it cannot build, the
# newest older architecture it can build is compiled as PTX only (the driver
# JIT-compiles it for the GPU), into OUT_PTX_ONLY.
function(_chorus_filter_archs wanted supported out_real out_ptx_only)
  set(real "")
  set(ptx_only "")
  foreach(a IN LISTS wanted)
    if(NOT supported OR a IN_LIST supported)
      list(APPEND real ${a})
      continue()
    endif()
    set(below 0)
    foreach(s IN LISTS supported)
      if(s LESS_EQUAL a AND s GREATER below)
        set(below ${s})
      endif()
    endforeach()
    if(below)
      message(WARNING "Chorus: ${CMAKE_CUDA_COMPILER} cannot build sm_${a}; "
                      "compiling compute_${below} PTX for it instead (JIT-compiled by the driver)")
      list(APPEND ptx_only ${below})
    else()
      message(WARNING "Chorus: ${CMAKE_CUDA_COMPILER} cannot build sm_${a}; "
                      "GPU mode will not run on that GPU (a CUDA toolkit that supports it can)")
    endif()
  endforeach()
  set(${out_real} "${real}" PARENT_SCOPE)
  set(${out_ptx_only} "${ptx_only}" PARENT_SCOPE)
endfunction()

# REAL 80;90, PTX_ONLY 86 -> "80-real;90-real;86-virtual;90-virtual":
# machine code for each of REAL, PTX for each of PTX_ONLY and for the newest
# of REAL, into OUT.
function(_chorus_arch_list real ptx_only out)
  list(SORT real COMPARE NATURAL)
  list(REMOVE_DUPLICATES real)
  set(virtual ${ptx_only})
  set(result "")
  foreach(a IN LISTS real)
    list(APPEND result ${a}-real)
  endforeach()
  if(real)
    list(GET real -1 newest)
    list(APPEND virtual ${newest})
  endif()
  list(SORT virtual COMPARE NATURAL)
  list(REMOVE_DUPLICATES virtual)
  foreach(a IN LISTS virtual)
    list(APPEND result ${a}-virtual)
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(chorus_choose_cuda_architectures)
  if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES} AND NOT "$CACHE{CMAKE_CUDA_ARCHITECTURES}" STREQUAL "")
    message(STATUS "Chorus: CUDA architectures $CACHE{CMAKE_CUDA_ARCHITECTURES} "
                   "(set with -DCMAKE_CUDA_ARCHITECTURES; kept in the cache)")
    return()
  endif()
  if(NOT "$ENV{CUDAARCHS}" STREQUAL "")
    message(STATUS "Chorus: CUDA architectures $ENV{CUDAARCHS} (from the CUDAARCHS environment variable)")
    set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}" PARENT_SCOPE)
    return()
  endif()
  _chorus_cuda_compiler_archs(supported)
  _chorus_visible_gpu_archs(visible)
  set(real "")
  set(ptx_only "")
  if(visible)
    _chorus_filter_archs("${visible}" "${supported}" real ptx_only)
    set(why "the GPUs visible now: sm_${visible}")
    string(REPLACE ";" ", sm_" why "${why}")
  endif()
  if(NOT real AND NOT ptx_only)
    if(visible)
      set(why "the visible GPUs cannot be built for: the default")
    else()
      set(why "no GPU visible to nvidia-smi: the default")
    endif()
    _chorus_filter_archs("${CHORUS_CUDA_DEFAULT_ARCHS}" "${supported}" real ptx_only)
  endif()
  _chorus_arch_list("${real}" "${ptx_only}" archs)
  if(NOT archs)
    message(FATAL_ERROR "Chorus: no CUDA architecture to build for; set -DCMAKE_CUDA_ARCHITECTURES=...")
  endif()
  message(STATUS "Chorus: CUDA architectures ${archs} (${why}; "
                 "choose with -DCMAKE_CUDA_ARCHITECTURES=..., e.g. 80 or \"80-real;90-real;90-virtual\")")
  set(CMAKE_CUDA_ARCHITECTURES "${archs}" PARENT_SCOPE)
endfunction()
