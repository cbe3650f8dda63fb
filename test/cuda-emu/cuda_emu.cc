// The fiber scheduler behind cuda_emu.h: runs one launch of an llmc CUDA
// kernel on the calling CPU thread, block after block; the threads of a block
// are fibers (ucontext) switched at __syncthreads, warp shuffles and mma.sync,
// which wait until every live thread of the block (or lane of the warp) has
// arrived. Linked into the kernels' emulation object; the fake CUDA driver
// calls llmc_emu_run for cuLaunchKernel.
#include "cuda_emu.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_abi.h"

namespace llmc_emu {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;

struct Barrier {
  int live = 0, arrived = 0;
  unsigned generation = 0;
};

struct Warp {
  Barrier barrier;
  uint64_t slots[32];
  // mma fragments of the 32 lanes: a[4], b[2], c[4].
  uint32_t a[32][4], b[32][2];
  float c[32][4];
};

struct Fiber {
  ucontext_t context;
  ThreadIds ids;
  bool done = false;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier barrier;
  ucontext_t scheduler;
  int current = 0;
  void (*body)(void*) = nullptr;
  void* arg = nullptr;
};

Block* g_block = nullptr;  // the block running on this (single) thread
std::vector<std::vector<char>> g_stacks;

Fiber& me() { return g_block->fibers[size_t(g_block->current)]; }
Warp& my_warp() { return g_block->warps[me().ids.thread.x / 32]; }

void yield() { swapcontext(&me().context, &g_block->scheduler); }

void arrive(Barrier& b) {
  unsigned gen = b.generation;
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == gen) yield();
}

// A fiber that finished no longer counts; a barrier it would have completed
// opens.
void leave(Barrier& b) {
  --b.live;
  if (b.arrived > 0 && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
  }
}

void fiber_main() {
  g_block->body(g_block->arg);
  Fiber& f = me();
  f.done = true;
  leave(g_block->barrier);
  leave(my_warp().barrier);
  swapcontext(&f.context, &g_block->scheduler);
}

float half_lo(uint32_t w, bool bf16) {
  uint16_t h = uint16_t(w & 0xffff);
  if (bf16) return __uint_as_float(uint32_t(h) << 16);
  __half x;
  memcpy(&x, &h, 2);
  return __half2float(x);
}
float half_hi(uint32_t w, bool bf16) { return half_lo(w >> 16, bf16); }

}  // namespace

const ThreadIds& self() { return me().ids; }

void sync_block() { arrive(g_block->barrier); }

uint64_t exchange(uint64_t value, int src) {
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  w.slots[lane] = value;
  arrive(w.barrier);
  uint64_t got = w.slots[src];
  arrive(w.barrier);
  return got;
}

void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16) {
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  memcpy(w.a[lane], a, sizeof a);
  memcpy(w.b[lane], b, sizeof b);
  memcpy(w.c[lane], c, sizeof c);
  arrive(w.barrier);
  // PTX's fragments: lane = 4 * group + tig. A (16x16, row): a0 = A[g][2t..],
  // a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; B (16x8, col):
  // b0 = B[2t..][g], b1 = B[2t+8..][g]; C (16x8): c0,c1 = C[g][2t, 2t+1],
  // c2,c3 = C[g+8][2t, 2t+1]. Low half = lower index.
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    int g = l >> 2, t = l & 3;
    for (int r = 0; r < 4; ++r) {
      int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
      A[row][col] = half_lo(w.a[l][r], bf16);
      A[row][col + 1] = half_hi(w.a[l][r], bf16);
    }
    for (int r = 0; r < 2; ++r) {
      B[2 * t + 8 * r][g] = half_lo(w.b[l][r], bf16);
      B[2 * t + 8 * r + 1][g] = half_hi(w.b[l][r], bf16);
    }
  }
  int g = lane >> 2, t = lane & 3;
  float out[4];
  for (int r = 0; r < 4; ++r) {
    int row = g + (r >> 1) * 8, col = 2 * t + (r & 1);
    float acc = w.c[lane][r];
    for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
    out[r] = acc;
  }
  arrive(w.barrier);
  memcpy(c, out, sizeof out);
}

}  // namespace llmc_emu

using llmc_emu::g_block;

namespace {
struct KernelCall {
  void* fn;
  void** params;
};
void call_kernel(void* p) {
  auto* k = static_cast<KernelCall*>(p);
  auto fn = reinterpret_cast<void (*)(llmc_cuda_step_info, llmc_cuda_args)>(k->fn);
  fn(*static_cast<const llmc_cuda_step_info*>(k->params[0]),
     *static_cast<const llmc_cuda_args*>(k->params[1]));
}
}  // namespace

// Runs kernel `fn` (an entry of this object, the llmc CUDA ABI) over the
// grid, as cuLaunchKernel would. Returns 0.
extern "C" __attribute__((visibility("default"))) int llmc_emu_run(void* fn, unsigned gx,
                                                                   unsigned gy, unsigned gz,
                                                                   unsigned bx, unsigned by,
                                                                   unsigned bz, void** params) {
  using namespace llmc_emu;
  const unsigned threads = bx * by * bz;
  if (by != 1 || bz != 1 || threads % 32 != 0 || threads > 1024) {
    std::fprintf(stderr, "llmc_emu_run: block %ux%ux%u: only 1-D blocks of whole warps\n", bx, by,
                 bz);
    return 1;
  }
  while (g_stacks.size() < threads) g_stacks.emplace_back(kStackBytes);
  KernelCall call{fn, params};
  Block block;
  block.body = call_kernel;
  block.arg = &call;
  block.fibers.resize(threads);
  block.warps.resize(threads / 32);
  g_block = &block;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        block.barrier = Barrier{int(threads), 0, 0};
        for (Warp& w : block.warps) w.barrier = Barrier{32, 0, 0};
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = block.fibers[t];
          f.done = false;
          f.ids.thread = uint3{t, 0, 0};
          f.ids.block = uint3{x, y, z};
          f.ids.block_dim = dim3(bx, by, bz);
          f.ids.grid_dim = dim3(gx, gy, gz);
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = g_stacks[t].data();
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = nullptr;
          makecontext(&f.context, fiber_main, 0);
        }
        // Round robin until every fiber has finished.
        for (unsigned left = threads; left > 0;) {
          left = 0;
          for (unsigned t = 0; t < threads; ++t) {
            if (block.fibers[t].done) continue;
            block.current = int(t);
            swapcontext(&block.scheduler, &block.fibers[t].context);
            left += block.fibers[t].done ? 0 : 1;
          }
        }
      }
  g_block = nullptr;
  return 0;
}
