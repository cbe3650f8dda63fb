# The layers of llmc and who may link whom, checked as a test (build/layering).
#
#   core      llmc_core_*          MLIR-free base: config, formats, artifact contract
#   runtime   llmc_runtime_*       MLIR-free execution; stands on core
#   dialect   LLMCDialect*         the llm dialect; stands on core (+ MLIR)
#   passes    LLMCPasses           stands on the dialect
#   compiler  other LLMC* libs     frontend, targets, artifact builder, driver
#   tools     llmc, llmc-opt, llmc-rt: executables, free to combine layers
#
# Included at the end of the top-level CMakeLists: llmc_write_link_report()
# records every library's direct link dependencies; `cmake -DREPORT=...
# -P Layering.cmake` (the test) reads them back and fails on an edge that
# points at a layer the rules below forbid.

cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...) in script mode too

function(llmc_layer_of name out)
  if(name MATCHES "^llmc_core")
    set(layer core)
  elseif(name MATCHES "^llmc_runtime")
    set(layer runtime)
  elseif(name MATCHES "^LLMCDialect")
    set(layer dialect)
  elseif(name STREQUAL "LLMCPasses")
    set(layer passes)
  elseif(name MATCHES "^LLMC")
    set(layer compiler)
  elseif(name MATCHES "^(MLIR|LLVM)")
    set(layer mlir)
  else()
    set(layer other)
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

# Layers each layer must not link.
set(LLMC_FORBIDDEN_core runtime dialect passes compiler mlir)
set(LLMC_FORBIDDEN_runtime dialect passes compiler mlir)
set(LLMC_FORBIDDEN_dialect runtime passes compiler)
set(LLMC_FORBIDDEN_passes runtime compiler)
set(LLMC_FORBIDDEN_compiler runtime)

function(llmc_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    llmc_collect_targets(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Writes "<target>|<dep>" lines for every llmc library into REPORT.
function(llmc_write_link_report report)
  llmc_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(lines "")
  foreach(t ${targets})
    llmc_layer_of(${t} layer)
    if(layer STREQUAL "other" OR layer STREQUAL "mlir")
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    set(deps "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(direct ${t} LINK_LIBRARIES)
      if(direct)
        list(APPEND deps ${direct})
      endif()
    endif()
    get_target_property(iface ${t} INTERFACE_LINK_LIBRARIES)
    if(iface)
      list(APPEND deps ${iface})
    endif()
    foreach(d ${deps})
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" d "${d}")
      string(APPEND lines "${t}|${d}\n")
    endforeach()
  endforeach()
  file(WRITE ${report} "${lines}")
endfunction()

# Script mode: check REPORT.
if(CMAKE_SCRIPT_MODE_FILE AND DEFINED REPORT)
  file(STRINGS ${REPORT} edges)
  list(LENGTH edges count)
  if(count EQUAL 0)
    message(FATAL_ERROR "layering: ${REPORT} lists no link edges (nothing was checked)")
  endif()
  set(bad "")
  foreach(edge ${edges})
    string(REPLACE "|" ";" parts "${edge}")
    list(GET parts 0 from)
    list(GET parts 1 to)
    llmc_layer_of(${from} from_layer)
    llmc_layer_of(${to} to_layer)
    if(to_layer IN_LIST LLMC_FORBIDDEN_${from_layer})
      string(APPEND bad "  ${from} (${from_layer}) links ${to} (${to_layer})\n")
    endif()
  endforeach()
  if(bad)
    message(FATAL_ERROR "layering: links that point at a forbidden layer:\n${bad}")
  endif()
  message(STATUS "layering: ${count} link edges, none against the layer rules")
endif()
