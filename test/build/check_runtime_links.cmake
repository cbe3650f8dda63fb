# Fails if BINARY has a dynamic dependency on LLVM or MLIR, or on the CUDA
# driver, NCCL or cuBLAS (read with ldd), or if it carries undefined symbols
# of theirs. The runtime never links LLVM or MLIR; it dlopens libcuda,
# libnccl and libcublasLt, so that one binary runs, and says why it cannot
# use a GPU, on a machine that has none of them.
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc})")
endif()
if(deps MATCHES "lib(LLVM|MLIR)[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}; the runtime must not link LLVM or MLIR:\n${deps}")
endif()
if(deps MATCHES "lib(cuda|nccl|cublas|cublasLt|cudart)\\.so[^ ]*")
  message(FATAL_ERROR "${BINARY} links ${CMAKE_MATCH_0}; the runtime must dlopen the CUDA "
                      "driver, NCCL and cuBLAS(Lt), never link them:\n${deps}")
endif()
execute_process(COMMAND nm -C --undefined-only ${BINARY} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${BINARY} failed (${rc}): its undefined symbols were not checked")
endif()
if(syms MATCHES "(llvm|mlir)::[A-Za-z_:]+")
  message(FATAL_ERROR "${BINARY} references ${CMAKE_MATCH_0}")
endif()
if(syms MATCHES " U (cu[A-Z][A-Za-z0-9_]*|nccl[A-Z][A-Za-z0-9_]*|cublas[A-Za-z0-9_]*)")
  message(FATAL_ERROR "${BINARY} references ${CMAKE_MATCH_1} (undefined: the CUDA driver, NCCL "
                      "or cuBLAS linked, not dlopened)")
endif()
message(STATUS "${BINARY}: no LLVM/MLIR, CUDA driver, NCCL or cuBLAS dependency\n${deps}")
