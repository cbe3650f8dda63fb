// The device sampling kernels built for the CPU under emulation
// (test/cuda-emu), as entries of the llmc CUDA ABI that llmc_emu_run
// launches; sample_emu_test.cc beside it feeds and checks them (separate
// translation units: the emulation's macros must not meet gtest's headers).
#include "cuda_abi.h"
#include "llmc_cuda_kernels.cuh"

using namespace llmc::cuda;

namespace {
// buffers: logits (f32 rows), ids (int per row), vocab (int), stride (long long).
template <int Threads> void argmax(const llmc_cuda_args& a) {
  sample_argmax_rows<Threads>(static_cast<const float*>(a.buffers[0]),
                              *static_cast<const long long*>(a.buffers[3]),
                              *static_cast<const int*>(a.buffers[2]), static_cast<int*>(a.buffers[1]));
}
} // namespace

extern "C" {
void emu_argmax_256(const llmc_cuda_step_info, const llmc_cuda_args a) { argmax<256>(a); }
void emu_argmax_32(const llmc_cuda_step_info, const llmc_cuda_args a) { argmax<32>(a); }
}
