// The fiber scheduler behind cuda_emu.h: runs one launch of an llmc CUDA
// kernel on the calling CPU thread, block after block; the threads of a block
// are fibers switched at __syncthreads, warp shuffles, ldmatrix and mma.sync, which wait
// until every live thread of the block (or lane of the warp) has arrived.
// Linked into the kernels' emulation object; the fake CUDA driver calls
// llmc_emu_run for cuLaunchKernel.
#include "cuda_emu.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_abi.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace llmc_emu {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;

// A fiber's saved machine state, and the switch between two of them.
//
// On x86-64 the switch is our own: it saves the callee-saved registers and
// the floating-point control words on the stack it leaves and restores them
// from the stack it enters, nothing else, as a call would. glibc's
// swapcontext also saves and restores the signal mask with a system call on
// every switch, which was 87% of an emulated engine step (perf) and made the
// engine's full-size invariance workload too slow to run. Elsewhere ucontext.
#if defined(__x86_64__)
extern "C" void llmc_emu_switch_stack(void** save_sp, void* to_sp);
asm(R"(
  .text
  .p2align 4
  .globl llmc_emu_switch_stack
  .hidden llmc_emu_switch_stack
  .type llmc_emu_switch_stack, @function
llmc_emu_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llmc_emu_switch_stack, .-llmc_emu_switch_stack
)");

struct Context {
  void* sp = nullptr;
};

void switch_context(Context& from, Context& to) { llmc_emu_switch_stack(&from.sp, to.sp); }

// Lays out on `stack` the frame llmc_emu_switch_stack pops: control words,
// six zeroed registers, then `entry` as the return address, placed so that
// `entry` starts with the stack alignment of a called function.
void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  auto* slot = reinterpret_cast<uint64_t*>(top);
  *--slot = 0;  // entry's own return address: it never returns
  *--slot = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; ++r) *--slot = 0;  // rbp, rbx, r12-r15
  uint32_t mxcsr;
  uint16_t fpu_cw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu_cw));
  *--slot = uint64_t(mxcsr) | uint64_t(fpu_cw) << 32;
  c.sp = slot;
}
#else
struct Context {
  ucontext_t uc;
};

void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

void make_context(Context& c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

struct Barrier {
  int live = 0, arrived = 0;
  unsigned generation = 0;
};

// What the lanes of a warp hand each other. Two of each, picked by the
// parity of the warp barrier's generation when a lane arrives: a lane that
// has read and runs ahead to the next exchange writes the other copy, and
// cannot reach a third before every lane has arrived at (so read) the second.
// So one barrier per exchange instead of a second one before overwriting.
struct Warp {
  Barrier barrier;
  uint64_t slots[2][32];
  // mma fragments of the 32 lanes: a[4], b[2], c[4].
  uint32_t a[2][32][4], b[2][32][2];
  float c[2][32][4];
};

struct Fiber {
  Context context;
  ThreadIds ids;
  bool done = false;
  // The barrier this fiber waits on and its generation then: the scheduler
  // resumes it only once that generation has passed.
  const Barrier* waiting = nullptr;
  unsigned waiting_generation = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier barrier;
  Context scheduler;
  int current = 0;
  void (*body)(void*) = nullptr;
  void* arg = nullptr;
};

Block* g_block = nullptr;  // the block running on this (single) thread
std::vector<std::vector<char>> g_stacks;

Fiber& me() { return g_block->fibers[size_t(g_block->current)]; }
Warp& my_warp() { return g_block->warps[me().ids.thread.x / 32]; }

void yield() { switch_context(me().context, g_block->scheduler); }

void arrive(Barrier& b) {
  unsigned gen = b.generation;
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  Fiber& f = me();
  f.waiting = &b;
  f.waiting_generation = gen;
  while (b.generation == gen) yield();
  f.waiting = nullptr;
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
  switch_context(f.context, g_block->scheduler);
  __builtin_unreachable();  // a finished fiber is never resumed
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
  unsigned copy = w.barrier.generation & 1;
  w.slots[copy][lane] = value;
  arrive(w.barrier);
  return w.slots[copy][src];
}

bool vote_any(bool pred) {
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  unsigned copy = w.barrier.generation & 1;
  w.slots[copy][lane] = pred;
  arrive(w.barrier);
  uint64_t any = 0;
  for (int l = 0; l < 32; ++l) any |= w.slots[copy][l];
  return any != 0;
}

void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  // The lanes' row addresses through the exchange slots, one barrier: lane l
  // reads bytes 4 (l % 4) .. of the row that lane 8 j + l / 4 gave, for
  // matrix j (PTX's ldmatrix fragment layout, that of the mma operands).
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  unsigned copy = w.barrier.generation & 1;
  w.slots[copy][lane] = reinterpret_cast<uintptr_t>(row);
  arrive(w.barrier);
  for (int j = 0; j < 4; ++j) {
    const auto* src = reinterpret_cast<const char*>(uintptr_t(w.slots[copy][8 * j + lane / 4]));
    memcpy(&r[j], src + 4 * (lane % 4), 4);
  }
}

void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  unsigned copy = w.barrier.generation & 1;
  w.slots[copy][lane] = reinterpret_cast<uintptr_t>(row);
  arrive(w.barrier);
  for (int j = 0; j < 4; ++j) {
    uint16_t e[2];
    for (int h = 0; h < 2; ++h) {
      const auto* src =
          reinterpret_cast<const char*>(uintptr_t(w.slots[copy][8 * j + 2 * (lane % 4) + h]));
      memcpy(&e[h], src + 2 * (lane / 4), 2);
    }
    r[j] = uint32_t(e[0]) | uint32_t(e[1]) << 16;
  }
}

uint32_t movmatrix_trans(uint32_t x) {
  // Transposed element (r, j) is element (j, r): held by lane 4 j + r / 2,
  // in its half r % 2.
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  unsigned copy = w.barrier.generation & 1;
  w.slots[copy][lane] = x;
  arrive(w.barrier);
  const int r = lane / 4, c = lane % 4;
  uint32_t out = 0;
  for (int h = 0; h < 2; ++h) {
    const int j = 2 * c + h;
    const uint32_t word = uint32_t(w.slots[copy][4 * j + r / 2]);
    out |= ((word >> (16 * (r % 2))) & 0xffffu) << (16 * h);
  }
  return out;
}

void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16) {
  Warp& w = my_warp();
  int lane = int(me().ids.thread.x & 31);
  unsigned copy = w.barrier.generation & 1;
  memcpy(w.a[copy][lane], a, sizeof a);
  memcpy(w.b[copy][lane], b, sizeof b);
  memcpy(w.c[copy][lane], c, sizeof c);
  // The lane that arrives last multiplies for the whole warp, into the
  // copy's c, before it opens the barrier; the others read their rows.
  if (w.barrier.arrived + 1 == w.barrier.live) {
    // PTX's fragments: lane = 4 * group + tig. A (16x16, row): a0 =
    // A[g][2t..], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..];
    // B (16x8, col): b0 = B[2t..][g], b1 = B[2t+8..][g]; C (16x8): c0,c1 =
    // C[g][2t, 2t+1], c2,c3 = C[g+8][2t, 2t+1]. Low half = lower index.
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int r = 0; r < 4; ++r) {
        int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
        A[row][col] = half_lo(w.a[copy][l][r], bf16);
        A[row][col + 1] = half_hi(w.a[copy][l][r], bf16);
      }
      for (int r = 0; r < 2; ++r) {
        B[2 * t + 8 * r][g] = half_lo(w.b[copy][l][r], bf16);
        B[2 * t + 8 * r + 1][g] = half_hi(w.b[copy][l][r], bf16);
      }
    }
    for (int l = 0; l < 32; ++l) {
      int g = l >> 2, t = l & 3;
      for (int r = 0; r < 4; ++r) {
        int row = g + (r >> 1) * 8, col = 2 * t + (r & 1);
        float acc = w.c[copy][l][r];
        for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
        w.c[copy][l][r] = acc;
      }
    }
  }
  arrive(w.barrier);
  memcpy(c, w.c[copy][lane], sizeof c);
}

// Element (row, k) of a K-major 16-bit operand whose descriptor has
// stride byte offset `sbo` and swizzle `mode` (1: 128 B, 2: 64 B, 3: 32 B):
// rows of the swizzle's width within groups of 8, groups sbo apart; the
// hardware swizzles address bits [4, 4 + b) with bits [7, 7 + b).
static float wgmma_element(const char* start, int row, int k, uint64_t sbo, int mode, bool bf16) {
  const int bits = mode == 1 ? 3 : mode == 2 ? 2 : 1;
  const uintptr_t width = uintptr_t(16) << bits;
  uintptr_t at = reinterpret_cast<uintptr_t>(start) + uintptr_t(row / 8) * sbo +
                 uintptr_t(row % 8) * width + uintptr_t(k) * 2;
  at ^= ((at >> 7) & ((uintptr_t(1) << bits) - 1)) << 4;
  uint16_t e;
  memcpy(&e, reinterpret_cast<const void*>(at), 2);
  return half_lo(e, bf16);
}

void wgmma_m64nNk16(float* d, int n, uint64_t desc_hi, const void* a, const void* b, bool bf16) {
  const int mode = int(desc_hi >> 62);
  const uint64_t sbo = ((desc_hi >> 32) & 0x3fff) << 4;
  if (mode == 0 || (desc_hi >> 49 & 7) != 0 || (desc_hi & 0x3fff) != 0) {
    fprintf(stderr, "cuda_emu: wgmma descriptor %#llx: only swizzled layouts with a zero base "
            "offset and the start address given apart are modelled\n",
            static_cast<unsigned long long>(desc_hi));
    abort();
  }
  const int tid = int(me().ids.thread.x), lane = tid & 31, warp = (tid >> 5) & 3;
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  for (int i = 0; i < n / 2; ++i) {
    const int row = 16 * warp + lane / 4 + 8 * ((i / 2) & 1);
    const int col = 8 * (i / 4) + 2 * (lane & 3) + (i & 1);
    float acc = d[i];
    for (int k = 0; k < 16; ++k)
      acc += wgmma_element(pa, row, k, sbo, mode, bf16) * wgmma_element(pb, col, k, sbo, mode, bf16);
    d[i] = acc;
  }
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
          f.waiting = nullptr;
          // Stack tops staggered by a few hundred bytes: at one stride of
          // 256 KiB every fiber's frames would fall into the same cache sets.
          make_context(f.context, g_stacks[t].data(), kStackBytes - (t % 61) * 256, fiber_main);
        }
        // Round robin until every fiber has finished, resuming only those
        // not waiting on a barrier that is still closed. A pass that resumes
        // none is a deadlock: a barrier some live thread never reaches.
        for (unsigned left = threads; left > 0;) {
          left = 0;
          bool resumed = false;
          for (unsigned t = 0; t < threads; ++t) {
            Fiber& f = block.fibers[t];
            if (f.done) continue;
            if (f.waiting == nullptr || f.waiting->generation != f.waiting_generation) {
              block.current = int(t);
              switch_context(block.scheduler, f.context);
              resumed = true;
            }
            left += f.done ? 0 : 1;
          }
          if (!resumed) {
            std::fprintf(stderr,
                         "llmc_emu_run: block (%u,%u,%u) deadlocked: %u threads wait on a "
                         "barrier that the others never reach\n",
                         x, y, z, left);
            std::abort();
          }
        }
      }
  g_block = nullptr;
  return 0;
}
