# nccl-tests compatible tools (benchmarks/README.md): one executable per
# collective in colls/, all sharing the driver in common/, plus the chorusrun
# launcher. With MPI found, each tool also gets a <name>_mpi variant that
# takes its process layout from MPI. Everything lands in ${CMAKE_BINARY_DIR}/bin.
set(_bench_dir ${CMAKE_CURRENT_LIST_DIR})
set(_bench_bin ${CMAKE_BINARY_DIR}/bin)

file(GLOB _bench_common_srcs CONFIGURE_DEPENDS ${_bench_dir}/common/*.cc)
list(REMOVE_ITEM _bench_common_srcs ${_bench_dir}/common/world.cc ${_bench_dir}/common/device_cuda.cc
     ${_bench_dir}/common/device_none.cc)

# The tools only use the public API. The header is told not to pull in the
# CUDA runtime headers (cudaStream_t stays the same opaque pointer); the
# CUDA runtime calls of GPU mode live in common/device_cuda.cc alone, which
# CUDA builds compile against the static runtime (as libchorus.so links it).
# Other builds get common/device_none.cc: host mode only.
if(CHORUS_ENABLE_CUDA)
  list(APPEND _bench_common_srcs ${_bench_dir}/common/device_cuda.cc)
else()
  list(APPEND _bench_common_srcs ${_bench_dir}/common/device_none.cc)
endif()
add_library(chorus_bench_core STATIC ${_bench_common_srcs})
target_include_directories(chorus_bench_core PUBLIC ${_bench_dir})
target_compile_definitions(chorus_bench_core PUBLIC CHORUS_NO_CUDA_HEADERS=1)
target_link_libraries(chorus_bench_core PUBLIC chorus Threads::Threads)
if(CHORUS_ENABLE_CUDA)
  target_link_libraries(chorus_bench_core PUBLIC CUDA::cudart_static)
endif()

# How processes find each other: environment rendezvous (plain tools) or MPI.
add_library(chorus_bench_world_env STATIC ${_bench_dir}/common/world.cc)
target_link_libraries(chorus_bench_world_env PUBLIC chorus_bench_core)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_library(chorus_bench_world_mpi STATIC ${_bench_dir}/common/world.cc)
  target_compile_definitions(chorus_bench_world_mpi PRIVATE CHORUS_BENCH_MPI=1)
  target_link_libraries(chorus_bench_world_mpi PUBLIC chorus_bench_core MPI::MPI_C)
endif()

# The CPU an idle communicator costs (benchmarks/compare/net_idle_cpu.cc).
add_executable(net_idle_cpu ${_bench_dir}/compare/net_idle_cpu.cc)
target_link_libraries(net_idle_cpu PRIVATE chorus_bench_core chorus_bench_world_env)
set_target_properties(net_idle_cpu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_bench_bin})

set(CHORUS_BENCH_TOOLS all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter)
foreach(_coll ${CHORUS_BENCH_TOOLS})
  add_executable(${_coll}_perf ${_bench_dir}/colls/${_coll}.cc)
  target_link_libraries(${_coll}_perf PRIVATE chorus_bench_core chorus_bench_world_env)
  set_target_properties(${_coll}_perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_bench_bin})
  if(MPI_C_FOUND)
    add_executable(${_coll}_perf_mpi ${_bench_dir}/colls/${_coll}.cc)
    target_link_libraries(${_coll}_perf_mpi PRIVATE chorus_bench_core chorus_bench_world_mpi)
    set_target_properties(${_coll}_perf_mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_bench_bin})
  endif()
endforeach()

add_executable(chorusrun ${_bench_dir}/launcher/chorusrun.cc ${_bench_dir}/launcher/cpu_binding.cc)
target_include_directories(chorusrun PRIVATE ${_bench_dir})
set_target_properties(chorusrun PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_bench_bin})

# `cmake --build <dir> --target chorus_benchmarks` builds just the tools.
add_custom_target(chorus_benchmarks)
foreach(_coll ${CHORUS_BENCH_TOOLS})
  add_dependencies(chorus_benchmarks ${_coll}_perf)
  if(MPI_C_FOUND)
    add_dependencies(chorus_benchmarks ${_coll}_perf_mpi)
  endif()
endforeach()
add_dependencies(chorus_benchmarks chorusrun)
