# Installs both libraries, the public headers, a CMake package
# (find_package(Chorus) -> Chorus::chorus) and a pkg-config file (chorus.pc).
include(CMakePackageConfigHelpers)

install(TARGETS chorus nccl EXPORT ChorusTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/chorus DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT ChorusTargets NAMESPACE Chorus:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ChorusConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ChorusConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ChorusConfig.cmake ${PROJECT_BINARY_DIR}/ChorusConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Chorus)

# The .pc file locates the prefix from its own directory, so an install moved
# elsewhere (or made with `cmake --install --prefix DIR`) stays usable.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CHORUS_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _pc_up "${_pc_up}")
  set(CHORUS_PC_PREFIX "\${pcfiledir}/${_pc_up}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/chorus.pc.in ${PROJECT_BINARY_DIR}/chorus.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/chorus.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
