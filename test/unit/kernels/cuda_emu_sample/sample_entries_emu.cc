// The device sampling kernels built for the CPU under emulation
// (test/cuda-emu), as entries of the llmc CUDA ABI that llmc_emu_run
// launches; sample_emu_test.cc beside it feeds and checks them (separate
// translation units: the emulation's macros must not meet gtest's headers).
#include "cuda_abi.h"
#include "llmc_cuda_kernels.cuh"

using namespace llmc::cuda;

namespace {
// The ABI's sampler (cuda_abi.h), as the generated entry binds it;
// the vocabulary comes in a.buffers[6] here (the generated entry has it as
// a constant).
template <int Threads> void sample(const llmc_cuda_args& a) {
  sample_picks<Threads, LLMC_CUDA_MAX_PICK_MASKED, LLMC_CUDA_MAX_PICK_TOP_K,
               LLMC_CUDA_MAX_PICK_LOGPROBS, LLMC_CUDA_MAX_PICK_PENALTIES>(
      static_cast<float*>(a.buffers[0]), *static_cast<const int*>(a.buffers[6]),
      static_cast<const llmc_cuda_pick*>(a.buffers[1]), static_cast<const int*>(a.buffers[2]),
      static_cast<int*>(a.buffers[3]), static_cast<llmc_cuda_logprob*>(a.buffers[4]),
      static_cast<const llmc_cuda_penalty*>(a.buffers[5]));
}
} // namespace

extern "C" {
void emu_sample_256(const llmc_cuda_step_info, const llmc_cuda_args a) { sample<256>(a); }
void emu_sample_32(const llmc_cuda_step_info, const llmc_cuda_args a) { sample<32>(a); }
}
