// The artifact contract: what `llmc compile` writes into model.llmc/ and the
// runtime reads back. It lives in core/, below both (build/layering checks
// that neither reaches the other through it), and both sides serialize
// through the functions here, so the JSON has exactly one definition.
//
// model.llmc/
//   manifest.json            this struct, as JSON
//   weights/rank0.bin        every weight in its packed format, 64-byte aligned
//                            (weights/rank<R>.bin: rank R's slices, when partitioned)
//   kernels/host/kernels.so  the host kernels (symbols listed in `kernels`)
//   kernels/host/src/...     the generated C++ they were built from
//   kernels/cuda/src/...     the generated CUDA C++ (with --target=sm_XX)
//   kernels/sm_XX/kernels.ptx  NVRTC's PTX for each CUDA target
//   tokenizer/...            tokenizer.json (+ tokenizer_config.json) or tokenizer.gguf
//   stages/<S>/...           pipeline stage S >= 1 (with --pp; the root is
//                            stage 0): manifest.json, kernels/ and weights/ as
//                            above, for that stage's layers. Its manifest's
//                            paths, like every path here, are relative to
//                            model.llmc/ ("stages/1/weights/rank2.bin").
//
// An artifact with dummy weights (`llmc compile --builtin=... --dummy-weights`)
// has no weight file: weights.dummy_seed is nonzero, weights.file and
// weights.checksum are empty, and the runtime generates the bytes at load
// (dummy_weights.h) at the offsets the tensors give, as if packed.
#ifndef LLMC_CORE_ARTIFACT_MANIFEST_H_
#define LLMC_CORE_ARTIFACT_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "llmc/core/model_config.h"

namespace llmc {

// Bumped on every incompatible change of the layout below.
inline constexpr int kArtifactFormatVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr uint64_t kWeightAlignment = 64;

struct ManifestTensor {
  std::string name;
  std::string format;          // weight_format.h name: f32, q4_1, i4, ...
  std::vector<int64_t> shape;  // logical, outermost first
  int64_t group = 0;           // i8/i4 quantization group
  uint64_t offset = 0;         // into the weight file, kWeightAlignment-aligned
  uint64_t bytes = 0;
};

// The seed `llmc compile --dummy-weights` writes (any nonzero value works).
inline constexpr uint64_t kDefaultDummySeed = 0x6c6c6d6364756d79ull;  // "llmcdumy"

struct ManifestWeights {
  std::string file;      // relative to the artifact root; empty for dummy weights
  uint64_t size = 0;     // bytes of the whole file (or of the generated weights)
  std::string checksum;  // ChecksumHex() of the whole file; empty for dummy weights
  // Nonzero: no file; the runtime generates every tensor from this seed and
  // its index (GenerateDummyWeights). 0: real weights (omitted in the JSON).
  uint64_t dummy_seed = 0;
  std::vector<ManifestTensor> tensors;
};

// An activation buffer. Its size depends on the step: `rows` is "tokens"
// (T rows) or "logits" (one row per logits_rows entry).
struct ManifestBuffer {
  std::string name;
  std::string rows;  // "tokens" | "logits"
  int64_t row_bytes = 0;
  std::string dtype;  // element type, for inspection: f32, f16, bf16
  int64_t row_elems = 0;
};

struct ManifestKernel {
  std::string name;    // the fusion group's name
  std::string target;  // "host": the host plan's kernels (CUDA kernels are in ManifestCuda)
  std::string symbol;  // entry point in the target's library
  std::string ops;     // what it computes, e.g. "linear q4_1 576x576"
  std::string launch;  // its launch shape as a function of T and S
};

// One kernel launch of the step plan, with what it binds, in ABI order; or
// one collective of a partitioned plan (`collective` set, `kernel` -1, no
// weights or caches). Those of a tensor-parallel group bind `buffers` =
// [input, output] over the rows of the buffers' row kind, the output
// possibly the input itself:
//   "all_reduce_sum"  output = the sum over the group's ranks of input
//                     (the same row width);
//   "all_gather"      output row = the ranks' input rows side by side, rank
//                     order, cut to the output's width (the last rank's
//                     padding dropped).
// Those between pipeline stages bind one buffer of token rows, and `peer`
// is the other stage (this rank's counterpart in it: the same TP rank):
//   "send"            buffers [input], in_row_elems wide, to stage peer =
//                     stage + 1 (the hidden state leaving this stage);
//   "recv"            buffers [output], out_row_elems wide, from stage
//                     peer = stage - 1.
struct ManifestStep {
  int64_t kernel = 0;            // index into `kernels`; -1 for a collective
  std::vector<int64_t> buffers;  // indices into `buffers`
  std::vector<int64_t> weights;  // indices into `weights.tensors`
  std::vector<int64_t> caches;   // layer indices (K and V are passed together)
  // The fusion group it runs, e.g. "layers.3.mlp.linear+add_7" (optional in
  // the file; `llmc inspect` groups launches per layer by it).
  std::string name;
  std::string collective;  // "" (a kernel), "all_reduce_sum", "all_gather"
  // A collective's row widths in elements, input and output (a buffer's
  // row_bytes is its widest value; rows are packed at the value's width).
  int64_t in_row_elems = 0, out_row_elems = 0;
  int64_t peer = -1;  // send/recv: the other pipeline stage
};

// One rank's weight file of a partitioned artifact. Every rank's file has
// the layout of `weights.tensors` (its slices have the same shapes).
struct ManifestMeshRank {
  std::string weights_file;  // "weights/rank1.bin"
  uint64_t weights_size = 0;
  std::string weights_checksum;  // ChecksumHex() of the file
};

// One pipeline stage: its manifest and the model's layers it runs.
struct ManifestStage {
  std::string manifest;  // "manifest.json" for stage 0, "stages/1/manifest.json", ...
  int64_t first_layer = 0;
  int64_t num_layers = 0;
};

// How the artifact is split over ranks (docs/partitioning.md). Absent from
// the file when tp == pp == 1. World rank R = stage * tp + r runs stage
// `R / tp`'s manifest on its own weight file: the tp ranks of one stage run
// one step plan (each stage has its own kernels). The manifest at the root
// is stage 0's; each stage's manifest holds the same mesh but for `stage`
// and `ranks`.
struct ManifestMesh {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t kv_heads = 0;                 // KV heads of one rank's cache
  int64_t stage = 0;                    // the pipeline stage this manifest describes
  std::vector<ManifestStage> stages;    // pp entries when pp > 1, else none
  std::vector<ManifestMeshRank> ranks;  // this stage's tp ranks, by TP rank
};

// One launch of a CUDA kernel. A kernel may need several in order (a GEMM
// group: the GEMM, then an in-place RoPE; attention: the split pass, then
// the reduction), and a GEMM has a GEMV variant for small token counts.
//   when:  "" (always), or "<var><op><int>" with var T (tokens), L (logits
//          rows) or splits, op <= > (e.g. "T<=8", "splits>1")
//   grid:  three expressions: an integer, T, L, splits, or cdiv(T|L,<int>)
// An affine function of a step's shape, for the performance model:
//   c + T*tokens + S*seqs + K*keys + L*logits_rows + P*passes
// keys: the keys attended, summed over the step's sequences (their context
// lengths); passes: cdiv(T, tokens_per_pass) of the launch's cost.
struct ManifestCostForm {
  double c = 0, t = 0, s = 0, k = 0, l = 0, p = 0;
  bool empty() const { return c == 0 && t == 0 && s == 0 && k == 0 && l == 0 && p == 0; }
};

// What one launch moves and computes (written by the emitter, which knows
// the kernel's loops; read by `llmc inspect --kernels` and gpu-check's
// model, never by the executor). Absent from the file when empty.
//   bytes:        DRAM bytes read and written (each weight byte once)
//   flops:        2 per multiply-add on the CUDA cores
//   tensor_flops: 2 per multiply-add on the tensor cores
//   trips:        iterations of the kernel's hot loop (its innermost loop
//                 with the most instructions in the SASS) summed over the
//                 launch's warps; the model multiplies them by that loop's
//                 instruction count
//   peeled_trips: of those trips, the ones a peeled copy of the loop runs
//                 after it (attention's masked key tiles; the GEMM's steps
//                 after its unrolled rounds). The copy is the later of the
//                 two largest loops in the SASS; the model counts each
//                 loop's own trips. Empty: no peeled copy.
struct ManifestCudaCost {
  ManifestCostForm bytes, flops, tensor_flops, trips, peeled_trips;
  int64_t tokens_per_pass = 0;  // 0: no pass term
  bool passes_of_logits = false;  // passes count L's rows, not T's (an LM head)
  bool empty() const {
    return bytes.empty() && flops.empty() && tensor_flops.empty() && trips.empty() &&
           peeled_trips.empty();
  }
};

struct ManifestCudaLaunch {
  std::string symbol;  // __global__ entry of every PTX module
  std::string when;
  std::vector<std::string> grid;  // x, y, z
  int64_t block = 128;            // threads per block
  // "" always; "llmc": the kernel's own GEMM, which a cuBLASLt GEMM
  // (ManifestCudaGemm) may replace.
  std::string impl;
  // The variant of the kernel's template this launch runs, as chosen by a
  // pass (e.g. "gemv=dp4a rows_per_warp=1"); "" for a kernel with one.
  std::string variant;
  // A split-K GEMM (grid z > 1 blocks along K per output tile): the f32
  // partial sums each block leaves in args.scratch past its header, and one
  // ticket per output tile (grid x * y) in args.tickets; the runtime sizes
  // both. 0: no split.
  int64_t split_floats = 0;
  ManifestCudaCost cost;
};

// A GEMM that cuBLASLt may run instead of the kernel's own launches with
// impl "llmc" (in their place): `pre` (grid (rows), 128 threads) writes the
// A operand [rows, k] to args.gemm_a, the prologue applied and the rows
// gathered; cublasLtMatmul computes args.gemm_d [rows, n] (f32) = A x W^T,
// W the step's weight number `weight`, [n, k] in the activation type;
// `epi` (grid (cdiv(columns, 128), rows), 128 threads) applies the
// epilogue to it. rows is the GEMM's row count, "T" or "L". n == 0: none.
struct ManifestCudaGemm {
  int64_t n = 0, k = 0, columns = 0;
  int64_t weight = 0;
  std::string rows;
  std::string pre, epi;
  // For a weight not in the activation type: the entry that dequantizes it
  // into args.gemm_b ([n, k], activation type), cuBLASLt's B operand then.
  std::string deq;
  // What the kernel's own launches write to args.gemm_a, which the runtime
  // then allocates whatever runs the GEMM: [operand_rows (T or L),
  // operand_k] elements of the activation type. The tensor-core GEMM's A
  // operand where a prologue is fused (operand_k = K), and the several-token
  // GEMV's int8 rows (xq8: q8_row_bytes(K) bytes a row). Independent of n
  // (0: none).
  int64_t operand_k = 0;
  std::string operand_rows;
};

struct ManifestCudaKernel {
  std::string name;  // e.g. "layers.0.attn.rms_norm+linear+split+rope_0"
  std::string ops;   // what it computes, as in ManifestKernel
  std::vector<ManifestCudaLaunch> launches;
  // Flash-decoding attention: keys per split and the partials' shape (the
  // runtime sizes its scratch by them); 0 for other kernels.
  int64_t split_keys = 0;
  int64_t heads = 0, head_dim = 0;
  ManifestCudaGemm gemm;
};

// An entry of the device sampler (cuda_abi.h): the runtime launches it
// after a step, grid (picks), `block` threads, so that only the picked
// token ids leave the GPU.
struct ManifestCudaSampler {
  std::string kind;  // "sample": greedy picks and seeded draws
  std::string symbol;
  int64_t block = 256;
};

// ptxas -v's numbers for one entry function of one module.
struct ManifestPtxasEntry {
  std::string symbol;
  int64_t registers = 0;
  int64_t spill_stores = 0, spill_loads = 0;  // bytes
  int64_t shared_bytes = 0;                   // static shared memory
  int64_t stack_bytes = 0;
};

struct ManifestCudaModule {
  std::string arch;      // "sm_90"
  std::string file;      // "kernels/sm_90/kernels.ptx"
  std::string checksum;  // ChecksumHex of the PTX
  std::vector<ManifestPtxasEntry> ptxas;
};

// The CUDA side of an artifact (empty `modules`: compiled for host only).
// Its step plan binds the same buffers (by index; element type
// activation_dtype, except every buffer of rows "logits" -- the logits and a
// TP rank's slice of them -- always f32), weights (by index) and caches as
// the host plan, in the order its kernels read them (the ABI of cuda_abi.h).
struct ManifestCuda {
  std::string activation_dtype;  // bf16 | f16 | f32; the KV cache too
  int64_t cuda_abi_version = 0;
  std::vector<ManifestCudaModule> modules;
  std::vector<ManifestCudaKernel> kernels;
  std::vector<ManifestStep> steps;  // `kernel` indexes `kernels` above
  std::vector<ManifestCudaSampler> samplers;  // none without logits (a stage before the last)
};

struct Manifest {
  int format_version = kArtifactFormatVersion;
  int host_abi_version = 0;
  std::string compiler;  // "llmc <version>"
  std::string source;    // the model it was compiled from
  ModelConfig model;
  std::vector<std::string> targets;  // "host", "sm_90", ...
  std::string activation_dtype;      // f32 | f16 | bf16
  std::string kv_dtype;
  ManifestWeights weights;
  std::vector<ManifestBuffer> buffers;
  std::vector<ManifestKernel> kernels;
  std::vector<ManifestStep> steps;
  // The buffer holding the step's logits; -1 on a pipeline stage before the
  // last (it sends its hidden state on instead).
  int64_t logits_buffer = -1;
  std::string host_library;  // e.g. "kernels/host/kernels.so"
  std::string tokenizer;     // e.g. "tokenizer/tokenizer.json"
  int64_t bos_id = -1, eos_id = -1;
  ManifestCuda cuda;
  ManifestMesh mesh;
};

std::string ManifestToJson(const Manifest& manifest);
// Parses and checks a manifest: version, index ranges, offsets within the
// weight file, alignment. `path` names the file in errors.
absl::StatusOr<Manifest> ManifestFromJson(const std::string& json, const std::string& path);

// 64-bit checksum of a byte range (fast, not cryptographic), as 16 hex digits.
std::string ChecksumHex(const uint8_t* data, uint64_t size);

// The checksum behind ChecksumHex, fed piece by piece (the weight writer
// hashes as it writes): Update(a); Update(b) gives the value of a + b.
//
// The algorithm ("llmc-hash64", fixed by format_version; little-endian loads,
// so every machine agrees): four 64-bit lanes each take every fourth 8-byte
// word of 32-byte blocks with XXH64's round, acc = rotl(acc + w * P2, 31) * P1;
// then the lanes, the length, the tail's whole words and its last 1-7 bytes
// (zero-padded) are folded in and the result avalanched. Every step is a
// bijection of the word it takes, so two inputs of one length that differ in a
// single aligned 8-byte word (any one-bit flip) never collide. Not XXH64's
// values: only its structure. About 4 bytes per cycle per core.
class Checksum64 {
 public:
  Checksum64();
  void Update(const uint8_t* data, uint64_t size);
  uint64_t Value() const;   // of everything so far; Update may continue after
  std::string Hex() const;  // Value() as 16 lowercase hex digits
  uint64_t size() const { return total_; }

 private:
  uint64_t lanes_[4];
  uint8_t pending_[32];
  uint64_t num_pending_ = 0;
  uint64_t total_ = 0;
};

// Checks one manifest already in memory (what ManifestFromJson checks after
// parsing). `path` names the file in errors.
absl::Status ValidateManifest(const Manifest& manifest, const std::string& path);

}  // namespace llmc

#endif  // LLMC_CORE_ARTIFACT_MANIFEST_H_
