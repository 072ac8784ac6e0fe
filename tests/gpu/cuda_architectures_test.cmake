# Tests cmake/cuda_architectures.cmake (which architectures the kernels are
# compiled for) with a fake nvidia-smi and a fake nvcc, so that it runs the
# same on every machine, with or without CUDA or a GPU.
#   cmake -DCHORUS_SOURCE_DIR=<repo> -DWORK_DIR=<scratch folder> -P cuda_architectures_test.cmake
cmake_minimum_required(VERSION 3.25)
include(${CHORUS_SOURCE_DIR}/cmake/cuda_architectures.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/bin)
set(failures 0)

# A script named NAME in the fake bin folder that prints TEXT and exits RC.
function(fake_tool name text rc)
  file(WRITE ${WORK_DIR}/bin/${name} "#!/bin/sh\nprintf '${text}'\nexit ${rc}\n")
  file(CHMOD ${WORK_DIR}/bin/${name} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()

# Runs the choice with nvidia-smi printing SMI_TEXT and exiting SMI_RC
# (SMI_RC "none": no nvidia-smi at all), and checks the result.
function(expect label smi_text smi_rc expected)
  file(REMOVE ${WORK_DIR}/bin/nvidia-smi)
  if(NOT smi_rc STREQUAL "none")
    fake_tool(nvidia-smi "${smi_text}" ${smi_rc})
  endif()
  set(ENV{PATH} "${WORK_DIR}/bin")
  unset(CMAKE_CUDA_ARCHITECTURES)
  chorus_choose_cuda_architectures()
  if(NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${expected}")
    message(SEND_ERROR "${label}: got '${CMAKE_CUDA_ARCHITECTURES}', expected '${expected}'")
    math(EXPR n "${failures} + 1")
    set(failures ${n} PARENT_SCOPE)
  endif()
endfunction()

# The compiler of a CUDA toolkit that builds sm_75 to sm_90.
fake_tool(nvcc "compute_75\\ncompute_80\\ncompute_86\\ncompute_89\\ncompute_90\\n" 0)
set(CMAKE_CUDA_COMPILER ${WORK_DIR}/bin/nvcc)

expect("H100/H200" "9.0\\n" 0 "90-real;90-virtual")
expect("two A100s" "8.0\\n8.0\\n" 0 "80-real;80-virtual")
expect("mixed GPUs, sorted" "9.0\\n8.6\\n" 0 "86-real;90-real;90-virtual")
expect("nvidia-smi without a driver" "NVIDIA-SMI has failed\\n" 9 "80-real;90-real;90-virtual")
expect("no nvidia-smi" "" none "80-real;90-real;90-virtual")
expect("old nvidia-smi without compute_cap" "Field \"compute_cap\" is not a valid field to query.\\n" 2
       "80-real;90-real;90-virtual")
expect("GPU newer than the toolkit: its newest PTX" "10.0\\n" 0 "90-virtual")
expect("GPU between two supported ones: PTX of the older" "8.7\\n" 0 "86-virtual")
expect("GPU older than the toolkit: the default" "7.0\\n" 0 "80-real;90-real;90-virtual")

# A toolkit that cannot say what it builds: the visible GPU as it is.
fake_tool(nvcc "" 1)
expect("unknown toolkit" "12.0\\n" 0 "120-real;120-virtual")

# The CUDAARCHS environment variable wins over detection.
set(ENV{CUDAARCHS} "75")
expect("CUDAARCHS" "9.0\\n" 0 "75")
unset(ENV{CUDAARCHS})

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} case(s) failed")
endif()
message(STATUS "all cases passed")
