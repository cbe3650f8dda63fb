# build/step-access: the Engine is the one driver of a step runner
# (StepAccess, runtime/include/llmc/runtime/exec/step_runner.h). Script mode:
#   cmake -DCXX=... -DINCLUDES="a|b|..." -DSOURCE_DIR=... -P StepAccess.cmake
# 1. Only tests name StepRunnerTestAccess (the key tests take); the friend
#    declaration in step_runner.h aside.
# 2. test/build/step_access_probe.cc compiles with that key and does not
#    compile with a key made anywhere else (`StepAccess{}`, a default
#    constructed one, or none).
cmake_minimum_required(VERSION 3.20)

file(GLOB_RECURSE sources LIST_DIRECTORIES false
     ${SOURCE_DIR}/runtime/*.h ${SOURCE_DIR}/runtime/*.cc ${SOURCE_DIR}/core/*.h
     ${SOURCE_DIR}/core/*.cc ${SOURCE_DIR}/compiler/*.h ${SOURCE_DIR}/compiler/*.cc
     ${SOURCE_DIR}/compiler/*.cuh ${SOURCE_DIR}/tools/*.cc ${SOURCE_DIR}/tools/*.h)
set(bad "")
foreach(f ${sources})
  file(STRINGS ${f} hits REGEX "StepRunnerTestAccess")
  if(hits AND NOT f MATCHES "/runtime/include/llmc/runtime/exec/step_runner\\.h$")
    string(APPEND bad "  ${f}\n")
  endif()
endforeach()
list(LENGTH sources count)
if(count LESS 50)
  message(FATAL_ERROR "step-access: only ${count} sources under ${SOURCE_DIR}: wrong tree?")
endif()
if(bad)
  message(FATAL_ERROR "step-access: StepRunnerTestAccess named outside the tests:\n${bad}")
endif()

string(REPLACE "|" ";" include_dirs "${INCLUDES}")
set(flags -std=c++20 -fsyntax-only -I${SOURCE_DIR}/test/unit)
foreach(d ${include_dirs})
  list(APPEND flags -I${d})
endforeach()
foreach(probe TESTS BRACES DEFAULT NO_KEY)
  execute_process(
    COMMAND ${CXX} ${flags} -DPROBE_${probe}=1 ${SOURCE_DIR}/test/build/step_access_probe.cc
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(probe STREQUAL "TESTS")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "step-access: the tests' key does not compile:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "step-access: probe ${probe} runs a step without the key and compiles")
  elseif(NOT err MATCHES "StepAccess|no matching")
    message(FATAL_ERROR "step-access: probe ${probe} fails for another reason:\n${err}")
  endif()
endforeach()
message(STATUS "step-access: ${count} sources checked; a step without the key does not compile")
