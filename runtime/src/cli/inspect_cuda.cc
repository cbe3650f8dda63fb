#include "inspect_cuda.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace llmc::cli {
namespace {

// Bytes of the file at `path`, or -1 when it cannot be read.
int64_t FileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

// "[T, 2, splits] x 128", the launch shape as CUDA spells it.
std::string Shape(const ManifestCudaLaunch& l) {
  return absl::StrFormat("[%s] x %d", absl::StrJoin(l.grid, ", "), l.block);
}

// One table per module: what ptxas reported for each entry, spills flagged
// (a spill is local memory traffic in the hot loop: the first thing to fix).
void AppendPtxas(const ManifestCudaModule& mod, std::string* out) {
  if (mod.ptxas.empty()) {
    absl::StrAppendFormat(out, "ptxas %s: no resource report in the manifest\n", mod.arch);
    return;
  }
  size_t width = 6;
  int64_t spilling = 0;
  for (const ManifestPtxasEntry& e : mod.ptxas) {
    width = std::max(width, e.symbol.size());
    spilling += (e.spill_stores > 0 || e.spill_loads > 0);
  }
  absl::StrAppendFormat(out, "ptxas %s: %d %s%s\n", mod.arch, mod.ptxas.size(),
                        mod.ptxas.size() == 1 ? "entry" : "entries",
                        spilling ? absl::StrFormat(", %d with spills", spilling) : "");
  absl::StrAppendFormat(out, "  %-*s %5s %13s %8s %6s\n", width, "symbol", "regs",
                        "spill st/ld B", "shared B", "stack");
  for (const ManifestPtxasEntry& e : mod.ptxas) {
    bool spills = e.spill_stores > 0 || e.spill_loads > 0;
    absl::StrAppendFormat(out, "  %-*s %5d %13s %8d %6d%s\n", width, e.symbol, e.registers,
                          absl::StrFormat("%d/%d", e.spill_stores, e.spill_loads), e.shared_bytes,
                          e.stack_bytes, spills ? "  <- SPILLS" : "");
  }
}

}  // namespace

void AppendCudaSection(const Artifact& artifact, bool steps, std::string* out) {
  const Manifest& m = artifact.manifest();
  const ManifestCuda& c = m.cuda;
  if (c.modules.empty()) return;
  std::vector<std::string> archs;
  for (const ManifestCudaModule& mod : c.modules) archs.push_back(mod.arch);
  absl::StrAppendFormat(out, "cuda     %s; activations and KV cache %s (logits f32), ABI %d\n",
                        absl::StrJoin(archs, ", "), c.activation_dtype, c.cuda_abi_version);
  for (const ManifestCudaModule& mod : c.modules) {
    int64_t bytes = FileBytes(artifact.Path(mod.file));
    absl::StrAppendFormat(out, "  %-7s %s: %s, checksum %s\n", mod.arch, mod.file,
                          bytes < 0 ? "unreadable" : absl::StrFormat("%d bytes of PTX", bytes),
                          mod.checksum);
  }

  std::vector<int64_t> uses(c.kernels.size());
  for (const ManifestStep& s : c.steps)
    if (s.kernel >= 0) ++uses[size_t(s.kernel)];  // -1: a collective
  size_t launches = 0, width = 0, shape_width = 0;
  for (const ManifestCudaKernel& k : c.kernels) {
    launches += k.launches.size();
    for (const ManifestCudaLaunch& l : k.launches) {
      width = std::max(width, l.symbol.size());
      shape_width = std::max(shape_width, Shape(l).size());
    }
  }
  absl::StrAppendFormat(out, "cuda kernels  %d unique (%d launch shapes), %d steps\n",
                        c.kernels.size(), launches, c.steps.size());
  for (size_t i = 0; i < c.kernels.size(); ++i) {
    const ManifestCudaKernel& k = c.kernels[i];
    absl::StrAppendFormat(out, "  c%-3d x%-4d %s%s\n", i, uses[i], k.ops,
                          k.split_keys > 0 ? absl::StrFormat(" (split attention, %d keys per split)",
                                                             k.split_keys)
                                           : "");
    for (const ManifestCudaLaunch& l : k.launches) {
      std::string line = absl::StrFormat("        %-*s %-*s", width, l.symbol, shape_width, Shape(l));
      if (l.when.empty())
        line.erase(line.find_last_not_of(' ') + 1);
      else
        line += " if " + l.when;
      *out += line + "\n";
    }
    if (k.gemm.n > 0 && !k.gemm.deq.empty())
      absl::StrAppendFormat(out, "        --gemm=cublaslt: %s [cdiv(%d,256), 1, 1] x 256 first\n",
                            k.gemm.deq, k.gemm.n * k.gemm.k / 8);
    if (k.gemm.n > 0)
      absl::StrAppendFormat(out,
                            "        --gemm=cublaslt: %s [%s, 1, 1], cublasLtMatmul %dx%d x %s rows, "
                            "%s [cdiv(%d,128), %s, 1] instead of the llmc launches\n",
                            k.gemm.pre, k.gemm.rows, k.gemm.n, k.gemm.k, k.gemm.rows, k.gemm.epi,
                            k.gemm.columns, k.gemm.rows);
  }
  for (const ManifestCudaSampler& s : c.samplers)
    absl::StrAppendFormat(out, "cuda sampler  %s: %s %s\n", s.kind, s.symbol,
                          s.kind == "feed"
                              ? absl::StrFormat("[cdiv(feeds,%d), 1, 1] x %d before a step "
                                                "scheduled early: the tokens the step before "
                                                "picked, on the device",
                                                s.block, s.block)
                              : absl::StrFormat("[picks, 1, 1] x %d after the step, over the "
                                                "logits; only the picked ids come back",
                                                s.block));
  if (steps)
    for (size_t i = 0; i < c.steps.size(); ++i)
      absl::StrAppendFormat(out, "  cuda step %4d: c%d %s\n", i, c.steps[i].kernel,
                            !c.steps[i].collective.empty() ? c.steps[i].collective
                            : c.steps[i].name.empty() ? c.kernels[size_t(c.steps[i].kernel)].ops
                                                      : c.steps[i].name);
  for (const ManifestCudaModule& mod : c.modules) AppendPtxas(mod, out);
}

}  // namespace llmc::cli
