// What the fake driver (fake_libcuda.cc) records of each cuLaunchKernel, for
// tests that run the CUDA runner's control flow without a GPU. The two
// kernel parameters are copied as the llmc CUDA ABI's structs (cuda_abi.h);
// the fake's device memory is host memory, so their pointers can be read.
// A launch made while its stream is being captured is recorded with the
// number of the graph it went into (it does not run); cuGraphLaunch records
// the number of the graph it replays.
#ifndef LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_
#define LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_

#include "llmc/core/artifact/cuda_abi.h"

struct FakeCudaLaunch {
  char symbol[96];           // the name cuModuleGetFunction was given
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  int has_params;            // kernelParams was not null
  llmc_cuda_step_info info;  // *kernelParams[0]
  llmc_cuda_args args;       // *kernelParams[1]
  int graph;                 // 0: launched; n > 0: captured into graph n (the n-th capture)
  int host_work;             // n > 0: not a kernel but captured host work n (fake_cuda_enqueue_host)
  int programmatic;          // by cuLaunchKernelEx with programmatic stream serialization
};

// Host work that another fake library (the fake cuBLASLt) puts on the
// stream: `run(ctx)` with a copy of ctx_bytes bytes of `ctx`, at once, or,
// while a graph is captured, when the graph is replayed (as a real library's
// kernels would be). Returns 0.
extern "C" int fake_cuda_enqueue_host(void (*run)(const void* ctx), const void* ctx,
                                      unsigned long ctx_bytes);

// Exported by the fake: launches recorded since the last reset, and the i-th.
extern "C" long fake_cuda_launch_count();
extern "C" int fake_cuda_launch(long i, FakeCudaLaunch* out);
// cuGraphLaunch calls since the last reset, and the graph the i-th replayed
// (0 if there is no i-th).
extern "C" long fake_cuda_graph_launch_count();
extern "C" int fake_cuda_graph_launch(long i);

#endif  // LLMC_TEST_UNIT_RUNTIME_CUDA_FAKE_FAKE_LIBCUDA_H_
