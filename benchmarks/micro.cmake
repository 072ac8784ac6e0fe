# Micro-benchmarks of internal building blocks (Google Benchmark). Built only
# when the benchmark package is installed; they link the internal static
# library, so they are not part of the installed tools.
find_package(benchmark QUIET)
if(benchmark_FOUND)
  add_executable(chorus_host_reduce_bench ${CMAKE_CURRENT_LIST_DIR}/micro/host_reduce_bench.cc)
  target_link_libraries(chorus_host_reduce_bench PRIVATE chorus_internal benchmark::benchmark)
endif()

# Single-thread speed of the host wire codecs (plain executable, no Google
# Benchmark): `wire_codec_speed [-s 64M] [-n 5] [-l portable|avx2|both]`.
add_executable(wire_codec_speed ${CMAKE_CURRENT_LIST_DIR}/micro/wire_codec_speed.cc)
target_link_libraries(wire_codec_speed PRIVATE chorus_internal)
set_target_properties(wire_codec_speed PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
