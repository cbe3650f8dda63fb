# Finds LLVM/MLIR 19 (Debian's packages) and brings in TableGen/AddMLIR.
# Included from the top level *after* the runtime was added: HandleLLVMOptions
# turns off exceptions and RTTI for every directory added below this point.
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-19/lib/cmake/mlir)
if(NOT LLVM_VERSION_MAJOR EQUAL 19)
  message(FATAL_ERROR "llmc needs LLVM/MLIR 19, found ${LLVM_PACKAGE_VERSION} at ${MLIR_DIR}")
endif()
message(STATUS "llmc: MLIR ${MLIR_DIR}, LLVM ${LLVM_PACKAGE_VERSION}")

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})

include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
link_directories(${LLVM_BUILD_LIBRARY_DIR})
add_definitions(${LLVM_DEFINITIONS})

# lit and FileCheck come with Debian's LLVM 19.
set(LLMC_LIT "/usr/lib/llvm-19/build/utils/lit/lit.py" CACHE FILEPATH "lit.py")
set(LLMC_LLVM_TOOLS_DIR "${LLVM_TOOLS_BINARY_DIR}" CACHE PATH "FileCheck, not, ...")

# llmc_mlir_library(name SRCS... DEPENDS... LINK...): a compiler library linked
# against the MLIR and LLVM shared libraries (see TOOLCHAIN.md: MLIR alone fails
# with "DSO missing from command line").
function(llmc_mlir_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPENDS;LINK" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  target_include_directories(${name} PUBLIC
    ${PROJECT_SOURCE_DIR}/dialects/include ${PROJECT_BINARY_DIR}/dialects/include
    ${PROJECT_SOURCE_DIR}/passes/include ${PROJECT_BINARY_DIR}/passes/include
    ${PROJECT_SOURCE_DIR}/compiler)
  target_link_libraries(${name} PUBLIC ${ARG_LINK} MLIR LLVM)
endfunction()

# Umbrella targets AddMLIR's helpers attach to (some MLIR packages define them).
foreach(t mlir-headers mlir-doc)
  if(NOT TARGET ${t})
    add_custom_target(${t})
  endif()
endforeach()

# mlir-tblgen and the compiler sources find llmc's .td files and generated
# headers through these.
include_directories(
  ${PROJECT_SOURCE_DIR}/dialects/include ${PROJECT_BINARY_DIR}/dialects/include
  ${PROJECT_SOURCE_DIR}/passes/include ${PROJECT_BINARY_DIR}/passes/include)
