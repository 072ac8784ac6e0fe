# Micro-benchmarks of internal building blocks (Google Benchmark). Built only
# when the benchmark package is installed; they link the internal static
# library, so they are not part of the installed tools.
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(chorus_host_reduce_bench ${CMAKE_CURRENT_LIST_DIR}/micro/host_reduce_bench.cc)
  target_link_libraries(chorus_host_reduce_bench PRIVATE chorus_internal benchmark::benchmark)
endif()
