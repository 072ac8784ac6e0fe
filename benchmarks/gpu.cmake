# GPU micro-benchmarks (CUDA builds only): kernel bandwidth against the
# device's own copy bandwidth.
if(CHORUS_ENABLE_CUDA)
  add_executable(reduce_kernel_perf ${CMAKE_CURRENT_LIST_DIR}/gpu/reduce_kernel_perf.cc)
  target_link_libraries(reduce_kernel_perf PRIVATE chorus_kernels chorus_internal)
  set_target_properties(reduce_kernel_perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
if(CHORUS_ENABLE_CUDA)
  add_executable(lane_kernel_perf ${CMAKE_CURRENT_LIST_DIR}/gpu/lane_kernel_perf.cc)
  target_link_libraries(lane_kernel_perf PRIVATE chorus_kernels)
  set_target_properties(lane_kernel_perf PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
