# Peer-comparison kit (benchmarks/compare/README in benchmarks/README.md):
# an OpenMPI all-reduce benchmark (when MPI is found), a Gloo ring
# all-reduce benchmark (when Gloo's headers and library are found) and a
# memcpy bandwidth probe. None of them links Chorus. run_compare.sh runs them.
set(_cmp_dir ${CMAKE_CURRENT_LIST_DIR})
set(_cmp_bin ${CMAKE_BINARY_DIR}/bin)

add_executable(memcpy_bw ${_cmp_dir}/compare/memcpy_bw.cc)
target_include_directories(memcpy_bw PRIVATE ${_cmp_dir})
set_target_properties(memcpy_bw PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_cmp_bin})
set(_cmp_targets memcpy_bw)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(mpi_allreduce_bench ${_cmp_dir}/compare/mpi_allreduce_bench.cc)
  target_include_directories(mpi_allreduce_bench PRIVATE ${_cmp_dir})
  target_link_libraries(mpi_allreduce_bench PRIVATE MPI::MPI_C)
  set_target_properties(mpi_allreduce_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_cmp_bin})
  list(APPEND _cmp_targets mpi_allreduce_bench)
endif()

find_path(CHORUS_GLOO_INCLUDE_DIR gloo/allreduce.h)
find_library(CHORUS_GLOO_LIBRARY gloo)
if(CHORUS_GLOO_INCLUDE_DIR AND CHORUS_GLOO_LIBRARY)
  add_executable(gloo_allreduce_bench ${_cmp_dir}/compare/gloo_allreduce_bench.cc)
  target_include_directories(gloo_allreduce_bench PRIVATE ${_cmp_dir})
  # Gloo's own headers are not ours to keep warning-free.
  target_include_directories(gloo_allreduce_bench SYSTEM PRIVATE ${CHORUS_GLOO_INCLUDE_DIR})
  target_link_libraries(gloo_allreduce_bench PRIVATE ${CHORUS_GLOO_LIBRARY} Threads::Threads)
  set_target_properties(gloo_allreduce_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${_cmp_bin})
  list(APPEND _cmp_targets gloo_allreduce_bench)
endif()

# `cmake --build <dir> --target chorus_compare` builds just the kit.
add_custom_target(chorus_compare DEPENDS ${_cmp_targets})
