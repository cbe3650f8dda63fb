# Fails if BINARY has a dynamic dependency on LLVM or MLIR (read with ldd), or
# if it carries undefined symbols from their namespaces.
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc})")
endif()
if(deps MATCHES "lib(LLVM|MLIR)[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}; the runtime must not link LLVM or MLIR:\n${deps}")
endif()
execute_process(COMMAND nm -C --undefined-only ${BINARY} OUTPUT_VARIABLE syms)
if(syms MATCHES "(llvm|mlir)::[A-Za-z_:]+")
  message(FATAL_ERROR "${BINARY} references ${CMAKE_MATCH_0}")
endif()
message(STATUS "${BINARY}: no LLVM/MLIR dependency\n${deps}")
