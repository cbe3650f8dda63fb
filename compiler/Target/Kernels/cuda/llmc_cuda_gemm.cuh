// llmc CUDA kernel library: gemm.
//
// The tensor-core GEMM (mma.sync m16n8k16 fed by cp.async and ldmatrix) for
// prefill and batched decode, and the operand and epilogue halves around a
// cuBLASLt GEMM.
//
// Part of llmc_cuda_kernels.cuh, the header generated kernels include; see
// README.md beside it for the library as a whole.
#ifndef LLMC_CUDA_GEMM_CUH_
#define LLMC_CUDA_GEMM_CUH_

#include "llmc_cuda_gemv.cuh"
#include "llmc_cuda_mma.cuh"
#include "llmc_cuda_mma_weights.cuh"
#include "llmc_cuda_wgmma.cuh"

namespace llmc {
namespace cuda {

//===----------------------------------------------------------------------===//
// Tensor-core GEMM: y[t, n] = sum_k x[t, k] w[n, k] for prefill and batched
// decode. A block computes Tile::BM tokens x Tile::BN weight rows with
// WarpsM x WarpsN warps (a warp tile of MI x NI m16n8k16 products), K in
// steps of 32 through a ring of Tile::Stages shared-memory buffers:
//  - the activation tile and, for weights already in the activation type,
//    the weight tile arrive by cp.async, Stages - 1 steps ahead of the
//    products;
//  - other weight formats are decoded from global memory (their own bytes:
//    4-bit weights are read as 4 bits) into the ring after the products of
//    each step, one step ahead, with their lines prefetched into L2 further
//    ahead still;
//  - operands go to registers by ldmatrix from swizzled tiles
//    (tile32_slot), mma.sync with f32 accumulators;
//  - the epilogue reads the accumulators where they are: a block's weight
//    rows are interleaved by part (tile row i is part i % kRows of output
//    column i / kRows), so a thread holds both parts of a gate/up pair; four
//    parts take one shuffle.
// x is plain activation rows (x_rows gathers them; a fused prologue has
// already run: gemm_operand). Tokens beyond T and columns beyond NOut are
// zero-filled and not stored, so T need not be a multiple of BM.
// Launch: blockDim = Tile::Threads, grid = (ceil(T / BM), ceil(NOut / (BN /
// kRows)), Tile::KSplit): a block's neighbours in launch order share its
// weight tile, so the weight is read from DRAM about once however many token
// tiles there are. With KSplit > 1 the blocks of z = 0 .. KSplit-1 take equal
// runs of K for one output tile, so that a GEMM of few output tiles and long
// K (a 4,096-row projection at decode: 64 tiles for 132 SMs) still fills the
// GPU; their sums meet in `split` (gemm_split).
//===----------------------------------------------------------------------===//
template <int BM_, int BN_, int WarpsM_, int WarpsN_, int Stages_, int KSplit_ = 1,
          bool Unroll_ = false, bool Wgmma_ = false>
struct gemm_tile {
  static constexpr int BM = BM_, BN = BN_, WarpsM = WarpsM_, WarpsN = WarpsN_, Stages = Stages_;
  static constexpr int KSplit = KSplit_; // blocks along K per output tile (grid z)
  // The main loop unrolled over the ring's stages (gemm_mma), for weights
  // copied or decoded by steps; the emitter sets it where ptxas fits it
  // without spills.
  static constexpr bool Unroll = Unroll_;
  // The products on Hopper's warpgroup MMA (llmc_cuda_wgmma.cuh: sm_90a)
  // instead of mma.sync: each warpgroup of 4 warps (WarpsM / 4 of them,
  // WarpsN = 1) multiplies MI blocks of 64 token rows by all BN weight rows
  // of a step straight from the ring. Warp w of warpgroup g holds, of
  // block mi, token rows 64 (g MI + mi) + 16 (w % 4) .. + 15, as mma.sync's
  // m16n8 fragments (acc[mi]); the split-K sums read them unchanged and the
  // epilogue places their rows (gemm_mma's row_of).
  static constexpr bool Wgmma = Wgmma_;
  static constexpr int BK = 32, Threads = 32 * WarpsM * WarpsN;
  static constexpr int MI = BM / WarpsM / 16, NI = BN / WarpsN / 8;
  // 16-byte slots of one stage: the activation tile, then the weight tile.
  static constexpr int StageSlots = (BM + BN) * 4;
  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0,
                "gemm_tile: warp tiles of whole m16 x n16 blocks");
  static_assert(BM * 4 % Threads == 0 && BN * 4 % Threads == 0,
                "gemm_tile: every thread copies the same number of 16-byte chunks");
  static_assert(Stages >= 2, "gemm_tile: at least two stages");
  static_assert(Stages * StageSlots * 16 <= 48 * 1024, "gemm_tile: over 48 KB of shared memory");
  static_assert(KSplit >= 1 && KSplit <= 16, "gemm_tile: 1 to 16 splits of K");
  static_assert(!Wgmma || (WarpsN == 1 && WarpsM % 4 == 0 && (MI == 1 || MI == 2) &&
                           (BN == 64 || BN == 128)),
                "gemm_tile: a wgmma tile is warpgroups of one or two 64-row token blocks by 64 "
                "or 128 weight rows");
};

// Where a split-K GEMM (Tile::KSplit > 1) leaves its partial sums: `part`,
// f32, Tile::BM * Tile::BN per block of the grid (the runtime's scratch
// past its header, sized by the launch's manifest split_floats), and
// `tickets`, one counter per output tile, zero before the launch (the
// runtime's args.tickets, zeroed at allocation; the tile's last block
// zeroes its counter again).
struct gemm_split {
  float* part;
  int* tickets;
};

namespace detail {
// The words a row-decoding format loads for one step of Count groups
// (mmaw::step_decoder<Fmt>::step_words); an empty struct where rows are decoded by
// group (Count 0).
template <class Fmt, int Count> struct row_step_words {
  using type = typename mmaw::step_decoder<Fmt>::template step_words<Count>;
};
template <class Fmt> struct row_step_words<Fmt, 0> {
  struct type {};
};
// What such a format shares between the steps of a quartet (step_state).
template <class Fmt, bool RowDecode> struct row_step_state {
  using type = typename mmaw::step_decoder<Fmt>::step_state;
};
template <class Fmt> struct row_step_state<Fmt, false> {
  struct type {};
};
// Weights whose bytes are already the activation type: copied, not decoded.
template <class Fmt, class Act> struct raw_weight { static constexpr bool value = false; };
template <> struct raw_weight<fmt::bf16, __nv_bfloat16> { static constexpr bool value = true; };
template <> struct raw_weight<fmt::f16, __half> { static constexpr bool value = true; };
} // namespace detail

template <class Fmt, int NOut, int K, class Act, class Tile, class Epi>
__device__ void gemm_mma(int T, const int* x_rows, const Act* __restrict__ x,
                         const void* __restrict__ w, const Epi& epi,
                         gemm_split split = {nullptr, nullptr}) {
  static_assert(is_same<Act, __half>::value || is_same<Act, __nv_bfloat16>::value,
                "gemm_mma: activations must be half or bf16 (f32 activations use gemv)");
  static_assert(K % 32 == 0, "gemm_mma: K must be a multiple of 32");
  static_assert(Fmt::block_elems == 1 || K % Fmt::block_elems == 0, "gemm_mma: K splits a block");
  constexpr int BM = Tile::BM, BN = Tile::BN, S = Tile::Stages, MI = Tile::MI, NI = Tile::NI;
  constexpr int P = Epi::kRows, BNO = BN / P, KT = K / 32, KS = Tile::KSplit, KTS = KT / KS;
  static_assert(KT % KS == 0, "gemm_mma: the splits of K take whole 32-element steps each");
  constexpr int AL = BM * 4 / Tile::Threads, BL = BN * 4 / Tile::Threads;
  constexpr bool kRaw = detail::raw_weight<Fmt, Act>::value;
  static_assert(P == 1 || P == 2 || P == 4, "gemm_mma: kRows must be 1, 2 or 4");
  static_assert(NI % 2 == 0, "gemm_mma: weight fragments come in pairs (ldmatrix x4)");
  // NVRTC compiles device code alone; nvcc also runs front-end passes with
  // __CUDA_ARCH__ but not the feature macro (wgmma_m64k16 fails its
  // real codegen for another arch instead).
#if defined(__CUDACC_RTC__) && !LLMC_CUDA_HAS_WGMMA
  static_assert(!Tile::Wgmma, "gemm_mma: wgmma tiles need sm_90a");
#endif
  // 1,024 bytes: the wgmma operand tiles (stages of (BM + BN) x 64 bytes,
  // multiples of 512) must sit on their swizzle's 512-byte period.
  __shared__ __align__(1024) uint4 smem[S * Tile::StageSlots];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / Tile::WarpsN, wn = warp % Tile::WarpsN;
  const int t0 = blockIdx.x * BM, n0 = blockIdx.y * BNO;
  const int kb = KS > 1 ? static_cast<int>(blockIdx.z) * KTS : 0; // this split's first step

  // This thread's 16-byte chunks of every stage: chunk i = tid + j * Threads
  // is row i / 4, chunk i % 4 (8 elements) of the tile. A token row past T
  // copies zeros.
  auto a_src = [&](int j, int kt, bool& valid) {
    const int i = tid + j * Tile::Threads, t = t0 + (i >> 2);
    valid = t < T;
    return x + (valid ? static_cast<i64>(x_rows ? x_rows[t] : t) * K : 0) + kt * 32 + (i & 3) * 8;
  };
  // The weight rows: chunk j's row is Threads / 4 tile rows past chunk 0's,
  // Threads / (4 P) output columns on, so one pointer and a count of valid
  // chunks hold them all (Epi::row is linear in the column; a pointer each
  // would cost registers the accumulators need).
  constexpr int kColStep = Tile::Threads / 4 / P;
  static_assert(Tile::Threads / 4 % P == 0, "gemm_mma: a thread's rows are parts of one column");
  // A format that decodes a whole step of a row at once (decode_step: one
  // scale conversion, word loads) gives each thread one tile row, all its
  // groups (BL = 4) or two of them (BL = 2; two threads a row), instead of
  // the BL rows of one group the chunk order would give it.
  constexpr bool kRowDecode = [] {
    if constexpr (!kRaw && mmaw::step_decoder<Fmt>::value) {
      if constexpr (mmaw::step_decoder<Fmt>::step_rows(K)) return BL == 4 || BL == 2;
    }
    return false;
  }();
  constexpr int kRowThreads = kRowDecode ? 4 / BL : 1; // threads per tile row
  const int my_row = tid / kRowThreads, my_first = tid % kRowThreads;
  const int row_tid = kRowDecode ? my_row * 4 : tid;  // as the chunk order's thread of that row
  const int col0 = n0 + (row_tid >> 2) / P;
  const u8* wrow0 = weight_row<Fmt>(w, col0 < NOut ? Epi::row(col0, (row_tid >> 2) % P) : 0, K);
  const int bvalid = col0 < NOut ? min(BL, (NOut - 1 - col0) / kColStep + 1) : 0;
  auto brow = [&](int j) { return wrow0 + Fmt::row_bytes(K) * j * kColStep; };

  // Shared addresses (to_shared) from here on: a stage's offset is added to
  // a thread's fixed slots, so that ptxas folds the rest into immediates.
  const shared_addr s0 = to_shared(smem);
  constexpr int kStageBytes = Tile::StageSlots * 16;
  // This thread's activation chunks: where each is at the start of the
  // main loop's current round (a_at, advanced a round at a time, so that
  // a step's copy is a_at plus an immediate), held in registers (opaque)
  // for the whole loop where there is room: word-decoded and raw weights,
  // and 4-warp tiles (up to 168 registers at 3 blocks an SM). The float
  // decoders' 8-warp tiles, at 128 registers, would spill; they recompute
  // them instead. Chunk j lands j * Threads slots past chunk 0 (its row is
  // j * Threads / 4 on, a multiple of 8, so tile32_slot's swizzle is the
  // same), so one register holds where all of them land.
  constexpr bool kKeepA = kRowDecode || kRaw || Tile::Threads <= 128;
  const Act* a_at[AL];
  bool a_ok[AL];
  const int a_slot = tile32_slot(tid >> 2, tid & 3);
  const shared_addr a_to = kKeepA ? opaque(s0 + a_slot * 16) : s0 + a_slot * 16;
#pragma unroll
  for (int j = 0; j < AL; ++j)
    if constexpr (kKeepA) a_at[j] = opaque(a_src(j, kb, a_ok[j]));
  // Raw weights' chunks likewise: chunk j is j * kColStep rows past chunk
  // 0, so one pointer holds them all (a chunk past NOut copies zeros from
  // where it would be: cp.async reads nothing there).
  const u8* b_at = kRaw ? opaque(brow(0) + Fmt::row_bytes(32 * kb) + (tid & 3) * 16) : nullptr;
  // The cp.async half of step kt's stage; kt is ds steps past the round's
  // start (a_at, b_at).
  auto copy_stage = [&](int kt, int ds, int stage) {
    const shared_addr sa = s0 + stage * kStageBytes;
#pragma unroll
    for (int j = 0; j < AL; ++j) {
      if constexpr (kKeepA) {
        cp_async16(a_to + stage * kStageBytes + j * Tile::Threads * 16, a_at[j] + ds * 32, a_ok[j]);
      } else {
        bool valid;
        const Act* src = a_src(j, kt, valid);
        cp_async16(sa + (a_slot + j * Tile::Threads) * 16, src, valid);
      }
    }
    if constexpr (kRaw) {
#pragma unroll
      for (int j = 0; j < BL; ++j)
        cp_async16(sa + (BM * 4 + a_slot + j * Tile::Threads) * 16,
                   b_at + Fmt::row_bytes(K) * j * kColStep + ds * 64, j < bvalid);
    }
  };
  // kRowDecode: a step's words are loaded (step_load) before the products
  // of the step before it and decoded after them, so that the products
  // cover the loads' latency.
  using StepWords = typename detail::row_step_words<Fmt, kRowDecode ? BL : 0>::type;
  StepWords words{};
  // The main loop (below): rounds of S steps while all of a round's
  // refills exist (s + S - 1 < KTS for its last step), then the remaining
  // S - 1 to 2 S - 2 steps. Those are unrolled too where there are
  // registers for it: not in the 128-row tiles (four activation chunks a
  // thread), which spill 8-24 B with them (q4_K, sm_80 and sm_90, 8B
  // shape) and run long splits (prefill, no split-K: the rolled steps are
  // 3% of 128). Rolled, the steps' stages and checks are computed at run
  // time: about 40 more instructions a step (q4_K 64 x 64, SASS sm_90),
  // which made them a third of a 16-step split's instructions. The float
  // decoders (their 8-element groups decoded in registers the unrolled
  // copies would share) spill when unrolled: they take every step rolled,
  // as do the tiles the emitter leaves so (Tile::Unroll).
  static_assert(!Tile::Unroll || kRaw || kRowDecode,
                "gemm_mma: Unroll is for weights copied or decoded by steps");
  constexpr bool kUnroll = Tile::Unroll, kUnrollTail = kUnroll && AL <= 2;
  constexpr int kRounds = !kUnroll ? 0 : KTS >= 2 * S - 1 ? (KTS - 2 * S + 1) / S + 1 : 0;
  constexpr int kRoundSteps = kRounds * S;
  // What the decoder shares between a quartet's steps (step_decoder). A
  // step's phase (kt % 4) is known at compile time in unrolled steps where
  // kb and every round's first step are multiples of 4; -1 elsewhere. Not
  // with 4 groups a thread (BL 4: the 64 x 128 tile), whose 128 registers
  // have no room for the state across the products: q4_K's spills there
  // (sm_90) and gains 7 of 668 instructions a round.
  typename detail::row_step_state<Fmt, kRowDecode>::type quartet{};
  constexpr bool kPhased = kUnroll && S % 4 == 0 && KTS % 4 == 0 && BL == 2;
  // A tile row past NOut decodes weight row 0 (wrow0): its products land in
  // columns the epilogue does not store, so it needs no branch.
  // Where a format's step loads may start from any whole number of its
  // rebase_steps into the row (q4_0: two steps, 36 bytes, keep the words
  // 4-byte aligned), the unrolled loop reads a round's steps from `w_at`,
  // the row at the round's first step (advanced a round at a time, as
  // a_at), plus a step offset that is a constant in every unrolled step:
  // no address arithmetic a step, where the row and step cost five
  // instructions and the L2 prefetch's address nine more (q4_0's 64 x 128
  // wgmma tile: 127 -> 119 a step, SASS sm_90a). Rounds, splits and the
  // fill start at multiples of S and KTS, so of rebase_steps.
  constexpr bool kRebase = [] {
    if constexpr (kRowDecode && kUnroll) {
      constexpr int g = mmaw::step_decoder<Fmt>::rebase_steps;
      return g > 0 && S % g == 0 && KTS % g == 0;
    }
    return false;
  }();
  const u8* w_at = kRebase ? wrow0 + Fmt::row_bytes(32 * kb) : nullptr;
  // Step kt's words (u steps past the round's first, w_at), and an L2
  // prefetch of the row 2 S steps on while that is in this split.
  auto load_words = [&](int kt, int u, int phase) {
    if constexpr (kRowDecode) {
      using D = mmaw::step_decoder<Fmt>;
      if constexpr (kRebase)
        D::template step_load<BL>(w_at, u, my_first, phase, words);
      else
        D::template step_load<BL>(wrow0, kt, my_first, phase, words);
      if (my_first == 0 && kt + 2 * S < kb + KTS)
        prefetch_l2(kRebase ? w_at + Fmt::row_bytes(32 * (u + 2 * S))
                            : wrow0 + Fmt::row_bytes(32 * (kt + 2 * S)));
    }
  };
  auto decode_stage = [&](int kt, int phase, uint4* sa) { // a decoded weight's half of step kt
    uint4* sb = sa + BM * 4;
    if constexpr (kRowDecode) { // from `words`, loaded by load_words(kt, phase)
      u32 q[4 * BL];
      mmaw::step_decoder<Fmt>::template step_decode<Act, BL>(words, kt, phase, quartet, q);
#pragma unroll
      for (int c = 0; c < BL; ++c)
        sb[tile32_slot(my_row, my_first + c * kRowThreads)] =
            make_uint4(q[4 * c], q[4 * c + 1], q[4 * c + 2], q[4 * c + 3]);
      return;
    }
#pragma unroll
    for (int j = 0; j < BL; ++j) {
      const int i = tid + j * Tile::Threads;
      // Far enough ahead for DRAM's latency to be over by the time it is
      // decoded: one line per row, from the thread that decodes chunk 0.
      if (j < bvalid && (i & 3) == 0 && kt + 2 * S < kb + KTS)
        prefetch_l2(brow(j) + Fmt::row_bytes(32 * (kt + 2 * S)));
      if constexpr (mmaw::of<Fmt>::value) { // straight to Act pairs
        u32 q[4] = {0u, 0u, 0u, 0u};
        if (j < bvalid) mmaw::of<Fmt>::template decode8<Act>(brow(j), kt * 4 + (i & 3), q);
        sb[tile32_slot(i >> 2, i & 3)] = make_uint4(q[0], q[1], q[2], q[3]);
      } else {
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (j < bvalid) Fmt::decode8(brow(j), kt * 4 + (i & 3), v);
        sb[tile32_slot(i >> 2, i & 3)] =
            make_uint4(pack2<Act>(v[0], v[1]), pack2<Act>(v[2], v[3]), pack2<Act>(v[4], v[5]),
                       pack2<Act>(v[6], v[7]));
      }
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // Where this lane's ldmatrix rows start, in 16-byte slots of a stage, and
  // its chunk of each k16 half: the swizzle term (row / 2 % 4) depends only
  // on the lane, since warp tiles and fragments start at multiples of 16
  // rows.
  const int arow0 = wm * (BM / Tile::WarpsM) + (lane & 15);
  const int brow0 = BM + wn * (BN / Tile::WarpsN) + (lane & 7) + ((lane >> 4) << 3);
  int achunk[2], bchunk[2];
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    achunk[kk] = (2 * kk + (lane >> 4)) ^ ((arow0 >> 1) & 3);
    bchunk[kk] = (2 * kk + ((lane >> 3) & 1)) ^ ((brow0 >> 1) & 3);
  }

  // This lane's ldmatrix rows in stage 0, per k16 half.
  shared_addr afrag[2], bfrag[2];
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    afrag[kk] = s0 + (arow0 * 4 + achunk[kk]) * 16;
    bfrag[kk] = s0 + (brow0 * 4 + bchunk[kk]) * 16;
    if constexpr (kKeepA) { // as the activation chunks' addresses, where there is room
      afrag[kk] = opaque(afrag[kk]);
      bfrag[kk] = opaque(bfrag[kk]);
    }
  }

  // wgmma's operand descriptors in stage 0: this warpgroup's first block of
  // 64 token rows, and the weight rows. A step adds its stage's offset, a
  // constant in unrolled steps. The warpgroup's index is broadcast from
  // lane 0 so that ptxas sees it is the same across the warp and keeps the
  // descriptors in uniform registers (from threadIdx it moved them there
  // every step: 12 R2UR a round of the 8-warp tile).
  const int wgroup = Tile::Wgmma && Tile::Threads > 128 ? __shfl_sync(0xffffffffu, warp >> 2, 0) : 0;
  const wgmma_desc a_desc = make_wgmma_desc(s0 + wgroup * MI * 64 * 64);
  const wgmma_desc b_desc = make_wgmma_desc(s0 + BM * 64);

  // Fill the pipeline: steps 0 .. S-2 of this split in flight (decoded
  // weights: only step 0, the loop decodes one step ahead).
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < KTS) copy_stage(kb + s, s, s);
    cp_async_commit();
  }
  if constexpr (!kRaw) {
    load_words(kb, 0, kPhased ? 0 : -1);
    decode_stage(kb, kPhased ? 0 : -1, smem);
  }

  // Step s of this split (kt = kb + s), u steps past the start of its
  // round (a_at, b_at): its products read stage Rd = s % S; it refills
  // stage (Rd + S - 1) % S, the one step s - 1 read, with step s + S - 1's
  // copies, and decodes step s + 1's weights into stage (Rd + 1) % S.
  // The main loop below is unrolled over a round of S steps, so that u and
  // Rd are constants in every copy and every stage address is a thread's
  // slot plus an immediate, every global one a round's pointer plus an
  // immediate. (With the stage in a register, each ldmatrix, copy and
  // store address cost an IMAD or two: about 30 of the q4_0 loop's 220
  // instructions a step, SASS sm_90.) `checked`: whether steps s + 1 and
  // s + S - 1 may be past the split's end.
  auto step = [&](int s, int u, int Rd, bool checked) {
    const int Wr = Rd == 0 ? S - 1 : Rd - 1, Next = Rd + 1 == S ? 0 : Rd + 1;
    const int kt = kb + s;
    cp_async_wait<S - 2>(); // this thread's copies of step kt have landed
    // wgmma reads the ring through the async proxy: the copies and the
    // decoded weights (generic-proxy writes) are made visible to it first.
    if constexpr (Tile::Wgmma) fence_proxy_async_shared();
    __syncthreads();        // everyone's, and step kt - 1's readers are done
    if (!checked || s + S - 1 < KTS) copy_stage(kt + S - 1, u + S - 1, Wr);
    cp_async_commit();
    // Step kt + 1's phase: u + 1 steps past a multiple of S (of 4,
    // kPhased) where u is a constant, in the rounds and the unrolled last
    // steps; unknown in rolled ones.
    const int phase = kPhased && (kUnrollTail || !checked) ? (u + 1) & 3 : -1;
    if (!checked || s + 1 < KTS) load_words(kt + 1, u + 1, phase);
    const int st = Rd * kStageBytes;
    if constexpr (Tile::Wgmma) {
      // Both k16 halves of the step in one group: each of the warpgroup's
      // MI blocks of 64 token rows against every weight row. The products
      // run while this thread decodes the next step's weights; they are
      // waited for at the step's end, before the next barrier lets anyone
      // refill this stage.
      wgmma_fence();
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        float(&d)[NI * 4] = reinterpret_cast<float(&)[NI * 4]>(acc[mi]);
        wgmma_m64k16<Act, BN>(d, a_desc + (st + mi * 64 * 64), b_desc + st);
        wgmma_m64k16<Act, BN>(d, a_desc + (st + mi * 64 * 64 + 32), b_desc + (st + 32));
      }
      wgmma_commit();
      if constexpr (!kRaw)
        if (!checked || s + 1 < KTS) decode_stage(kt + 1, phase, smem + Next * Tile::StageSlots);
      wgmma_wait<0>(reinterpret_cast<float(&)[MI * NI * 4]>(acc));
    } else {
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) { // the two k16 halves: chunks 2 kk, 2 kk + 1
        u32 a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(a[mi], afrag[kk] + st + mi * 16 * 64);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
          u32 r[4];
          ldmatrix_x4(r, bfrag[kk] + st + nj * 16 * 64);
          b[2 * nj][0] = r[0], b[2 * nj][1] = r[1], b[2 * nj + 1][0] = r[2], b[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) detail::mma_op<Act>::run(acc[mi][ni], a[mi], b[ni]);
      }
      // Step kt + 1's decoded weights, into the stage it reads (filled with
      // activations by cp.async; its readers passed this step's barrier),
      // while other warps multiply.
      if constexpr (!kRaw)
        if (!checked || s + 1 < KTS) decode_stage(kt + 1, phase, smem + Next * Tile::StageSlots);
    }
  };
#pragma unroll 1
  for (int first = 0; first < kRoundSteps; first += S) { // a round's first step
#pragma unroll
    for (int u = 0; u < S; ++u) step(first + u, u, u, false);
    // Opaque: the compiler would otherwise rewrite the pointers after the
    // loop as their first values plus the loop's whole advance, and keep
    // those first values in registers (spilled) through it.
    if constexpr (kKeepA)
#pragma unroll
      for (int j = 0; j < AL; ++j) a_at[j] = opaque(a_at[j] + S * 32);
    if constexpr (kRaw) b_at = opaque(b_at + S * 64);
    if constexpr (kRebase) w_at += Fmt::row_bytes(32 * S);
  }
  if constexpr (kUnrollTail) { // stages and checks are constants
#pragma unroll
    for (int s = kRoundSteps; s < KTS; ++s) step(s, s - kRoundSteps, s % S, true);
  } else {
    int rd = 0;
#pragma unroll 1
    for (int s = kRoundSteps; s < KTS; ++s) {
      step(s, s - kRoundSteps, rd, true);
      rd = rd + 1 == S ? 0 : rd + 1;
    }
  }
  cp_async_wait<0>();

  // Split K: every block leaves its sums in `split.part` and takes a
  // ticket; the tile's last block adds all of them in split order (so the
  // sum does not depend on which block finishes last) and runs the
  // epilogue. As the split attention's merge: partials made visible
  // device-wide before the ticket, read from L2 (__ldcg) after it.
  if constexpr (KS > 1) {
    constexpr int kAcc = MI * NI * 4;
    const i64 tile = static_cast<i64>(blockIdx.y) * gridDim.x + blockIdx.x;
    float* const mine = split.part + (tile * KS + blockIdx.z) * kAcc * Tile::Threads + tid;
#pragma unroll
    for (int e = 0; e < kAcc; ++e) mine[e * Tile::Threads] = acc[e / (NI * 4)][e / 4 % NI][e % 4];
    // The ticket's answer goes in the ring, free past this barrier (every
    // copy has landed, every product is done): a shared int of its own
    // would take a full 48 KB ring over the limit.
    int& last = *reinterpret_cast<int*>(smem);
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(split.tickets + tile, 1) == KS - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    // Its own sums too come back from L2, so the order of the additions is
    // the same whichever block is last.
    const float* const all = split.part + tile * KS * kAcc * Tile::Threads + tid;
#pragma unroll
    for (int e = 0; e < kAcc; ++e) acc[e / (NI * 4)][e / 4 % NI][e % 4] = 0.0f;
    for (int sp = 0; sp < KS; ++sp)
#pragma unroll
      for (int e = 0; e < kAcc; ++e)
        acc[e / (NI * 4)][e / 4 % NI][e % 4] += __ldcg(all + (sp * kAcc + e) * Tile::Threads);
    if (tid == 0) split.tickets[tile] = 0; // for the next launch
  }

  // Epilogue from the accumulators: c[2h], c[2h + 1] are token row
  // gid + 8h of the fragment and tile rows 2 t4, 2 t4 + 1. The fragment's
  // first token row: a warp's MI blocks of 16 rows lie together under
  // mma.sync, 64 rows apart under wgmma (gemm_tile).
  const int gid = lane >> 2, t4 = lane & 3;
  auto row_of = [&](int mi) {
    return Tile::Wgmma ? 64 * ((warp >> 2) * MI + mi) + 16 * (warp & 3)
                       : wm * (BM / Tile::WarpsM) + mi * 16;
  };
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int r = t0 + row_of(mi) + gid;
      const int c = wn * (BN / Tile::WarpsN) + ni * 8 + 2 * t4; // tile row, even
      const float* v = acc[mi][ni];
      if constexpr (P == 1) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (r + 8 * h < T) {
            if (n0 + c < NOut) epi(r + 8 * h, n0 + c, {v[2 * h]});
            if (n0 + c + 1 < NOut) epi(r + 8 * h, n0 + c + 1, {v[2 * h + 1]});
          }
      } else if constexpr (P == 2) {
        const int col = n0 + c / 2;
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (r + 8 * h < T && col < NOut) epi(r + 8 * h, col, {v[2 * h], v[2 * h + 1]});
      } else {
        // Parts 0, 1 sit in the even lane of a pair, 2, 3 in the odd one:
        // the even lane stores row gid, the odd lane row gid + 8.
        float o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) o[e] = __shfl_xor_sync(0xffffffffu, v[e], 1);
        const bool odd = t4 & 1;
        const int col = n0 + (c >> 2), row = r + (odd ? 8 : 0);
        if (row < T && col < NOut) {
          if (odd)
            epi(row, col, {o[2], o[3], v[2], v[3]});
          else
            epi(row, col, {v[0], v[1], o[0], o[1]});
        }
      }
    }
}

//===----------------------------------------------------------------------===//
// The two halves of a GEMM that cuBLASLt computes (manifest `gemm`):
// gemm_operand writes the A operand, the activation rows with the prologue
// applied (and gathered through x_rows); gemm_epilogue hands the f32
// products D [rows, NW] to the epilogue functor as the GEMV/GEMM would.
// gemm_operand: grid (rows), any blockDim multiple of 32.
// gemm_epilogue: grid (cdiv(Columns, blockDim), rows).
//===----------------------------------------------------------------------===//
template <int K, class Act, class Pro>
__device__ void gemm_operand(int rows, const int* x_rows, const Act* __restrict__ x, const Pro& pro,
                             Act* __restrict__ a) {
  static_assert(K % 8 == 0, "gemm_operand: K must be a multiple of 8");
  const int t = blockIdx.x;
  if (t >= rows) return;
  const Act* xr = x + static_cast<i64>(x_rows ? x_rows[t] : t) * K;
  __shared__ float row_scale;
  if constexpr (Pro::kRowScale) {
    if (threadIdx.x < 32) {
      const float r = pro.row_scale(xr);
      if (threadIdx.x == 0) row_scale = r;
    }
  } else if (threadIdx.x == 0) {
    row_scale = 1.0f;
  }
  __syncthreads();
  const float r = row_scale;
  for (int g = threadIdx.x; g < K / 8; g += blockDim.x) {
    float v[8], c[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    load8(xr + 8 * g, v);
    if constexpr (Pro::kColScale) pro.col8(g, c);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= r * c[i];
    store8(a + static_cast<i64>(t) * K + 8 * g, v);
  }
}

// A quantized weight [N, K] as rows of Act, cuBLASLt's B operand: one group
// of 8 elements per thread, decoded as the GEMMs decode it and stored in 16
// bytes. Grid cdiv(N * K / 8, blockDim) (at most 2^31 - 1 blocks).
template <class Fmt, int N, int K, class Act>
__device__ void dequantize_weight(const void* __restrict__ w, Act* __restrict__ out) {
  static_assert(K % 8 == 0, "dequantize_weight: K must be a multiple of 8");
  const i64 g = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= static_cast<i64>(N) * (K / 8)) return;
  const i64 n = g / (K / 8);
  const int c = static_cast<int>(g % (K / 8));
  float v[8];
  Fmt::decode8(weight_row<Fmt>(w, n, K), c, v);
  store8(out + n * K + 8 * c, v);
}

template <int Columns, int NW, class Epi>
__device__ void gemm_epilogue(int rows, const float* __restrict__ d, const Epi& epi) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
  if (n >= Columns || t >= rows) return;
  float acc[Epi::kRows];
#pragma unroll
  for (int p = 0; p < Epi::kRows; ++p) acc[p] = d[static_cast<i64>(t) * NW + Epi::row(n, p)];
  epi(t, n, acc);
}

} // namespace cuda
} // namespace llmc

#endif // LLMC_CUDA_GEMM_CUH_
