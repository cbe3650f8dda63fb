// What the fake driver (fake_libcuda.cc) records of each cuLaunchKernel, for
// tests that run the CUDA runner's control flow without a GPU. The two
// kernel parameters are copied as the llmc CUDA ABI's structs (cuda_abi.h);
// the fake's device memory is host memory, so their pointers can be read.
#ifndef LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_
#define LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_

#include "llmc/runtime/artifact/cuda_abi.h"

struct FakeCudaLaunch {
  char symbol[96];           // the name cuModuleGetFunction was given
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  int has_params;            // kernelParams was not null
  llmc_cuda_step_info info;  // *kernelParams[0]
  llmc_cuda_args args;       // *kernelParams[1]
};

// Exported by the fake: launches recorded since the last reset, and the i-th.
extern "C" long fake_cuda_launch_count();
extern "C" int fake_cuda_launch(long i, FakeCudaLaunch* out);

#endif  // LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_
