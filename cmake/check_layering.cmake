# The layering rule (docs/architecture.md, "Layers"): the scheduler, the graph
# search and the tuner (src/sched, src/graph, src/tune) include nothing from
# the executors (src/host, src/gpu), the enqueue layer, the transports or the
# kernels' collective code, and no CUDA header. Checked transitively: a header
# of src/core that pulled in src/host would break the rule as well.
#
# Used two ways:
#   include(cmake/check_layering.cmake)   at configure time: a violation stops
#                                         the configure;
#   cmake -DCHORUS_LAYER_ROOT=<dir> -P cmake/check_layering.cmake
#                                         as the ctest test "layering": exit
#                                         status 1 and one line per violation.
# CHORUS_LAYER_ROOT defaults to the project's source directory (the tests
# point it at a small tree with a known violation, to show the check fails).

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # script mode (-P) starts with no policies set
endif()

if(NOT CHORUS_LAYER_ROOT)
  if(PROJECT_SOURCE_DIR)
    set(CHORUS_LAYER_ROOT ${PROJECT_SOURCE_DIR})
  else()
    get_filename_component(CHORUS_LAYER_ROOT ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
  endif()
endif()

# Folders whose files must stay below the executors.
set(_layer_low_dirs src/sched src/graph src/tune)
# What they must not reach, as paths relative to the root.
set(_layer_forbidden src/host/ src/gpu/ src/enqueue/ src/transport/ transports/ kernels/colls/ kernels/primitives/)
# Angle-bracket includes that are CUDA headers.
set(_layer_cuda_regex "^cuda|^cu[a-z_]*\\.h$|^nv[a-z_]*\\.h$")
# The public API header may be reached: it names cudaStream_t but includes the
# CUDA runtime only when it exists, and the internal build defines
# CHORUS_NO_CUDA_HEADERS so that it never does.
set(_layer_leaves include/nccl.h)
# Where a quoted include is looked up (the include directories of the build).
set(_layer_search_dirs src include .)

# Sets ${out} to the root-relative path that `name` (quoted include in `from`)
# resolves to, or to "" when it is not a file of the project.
function(_layer_resolve name from out)
  get_filename_component(_dir ${from} DIRECTORY)
  foreach(_base ${_dir} ${_layer_search_dirs})
    if(EXISTS ${CHORUS_LAYER_ROOT}/${_base}/${name} AND NOT IS_DIRECTORY ${CHORUS_LAYER_ROOT}/${_base}/${name})
      get_filename_component(_abs ${CHORUS_LAYER_ROOT}/${_base}/${name} ABSOLUTE)
      file(RELATIVE_PATH _rel ${CHORUS_LAYER_ROOT} ${_abs})
      set(${out} ${_rel} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

function(_layer_forbidden_prefix path out)
  foreach(_p ${_layer_forbidden})
    string(FIND "${path}" "${_p}" _at)
    if(_at EQUAL 0)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

# The include chain that led to `file`: "a -> b -> file".
function(_layer_chain file out)
  set(_chain ${file})
  set(_cur ${file})
  while(DEFINED _layer_parent_${_cur})
    set(_cur ${_layer_parent_${_cur}})
    set(_chain "${_cur} -> ${_chain}")
  endwhile()
  set(${out} "${_chain}" PARENT_SCOPE)
endfunction()

function(chorus_check_layering result)
  set(_queue "")
  foreach(_d ${_layer_low_dirs})
    file(GLOB_RECURSE _files RELATIVE ${CHORUS_LAYER_ROOT} ${CHORUS_LAYER_ROOT}/${_d}/*.h ${CHORUS_LAYER_ROOT}/${_d}/*.cc
         ${CHORUS_LAYER_ROOT}/${_d}/*.cu ${CHORUS_LAYER_ROOT}/${_d}/*.cuh ${CHORUS_LAYER_ROOT}/${_d}/*.def)
    list(APPEND _queue ${_files})
  endforeach()
  list(REMOVE_DUPLICATES _queue)
  set(_seen ${_queue})
  set(_violations "")
  while(_queue)
    list(POP_FRONT _queue _file)
    file(STRINGS ${CHORUS_LAYER_ROOT}/${_file} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(_line IN LISTS _lines)
      if(NOT _line MATCHES "include[ \t]*([<\"])([^\">]+)[\">]")
        continue()
      endif()
      set(_kind ${CMAKE_MATCH_1})
      set(_name ${CMAKE_MATCH_2})
      if(_name MATCHES "${_layer_cuda_regex}")
        _layer_chain(${_file} _chain)
        list(APPEND _violations "${_chain} includes CUDA header <${_name}>")
        continue()
      endif()
      if(_kind STREQUAL "<")
        continue()
      endif()
      _layer_resolve(${_name} ${_file} _target)
      if(_target STREQUAL "")
        continue()
      endif()
      _layer_forbidden_prefix(${_target} _bad)
      if(_bad)
        _layer_chain(${_file} _chain)
        list(APPEND _violations "${_chain} includes ${_target}")
        continue()
      endif()
      if(_target IN_LIST _seen OR _target IN_LIST _layer_leaves)
        continue()
      endif()
      list(APPEND _seen ${_target})
      set(_layer_parent_${_target} ${_file})
      list(APPEND _queue ${_target})
    endforeach()
  endwhile()
  set(${result} "${_violations}" PARENT_SCOPE)
endfunction()

chorus_check_layering(_layer_violations)
if(_layer_violations)
  foreach(_v IN LISTS _layer_violations)
    message(STATUS "layering violation: ${_v}")
  endforeach()
  if(CMAKE_SCRIPT_MODE_FILE)
    message(FATAL_ERROR "layering check failed: src/sched, src/graph and src/tune must not reach the executors, "
                        "enqueue, transports, kernels/colls, kernels/primitives or CUDA (docs/architecture.md, Layers)")
  else()
    message(FATAL_ERROR "Chorus: layering check failed (see the violations above and docs/architecture.md, Layers)")
  endif()
endif()
