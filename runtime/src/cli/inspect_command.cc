#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "inspect_cuda.h"
#include "inspect_kernels.h"
#include "inspect_mesh.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/cli/flags.h"
#include "run_command.h"

namespace llmc::cli {
namespace {

// The decoder layer a launch belongs to: N of a group named "layers.N....",
// or -1 for the ones outside the layers (embedding, LM head).
int64_t LayerOf(const std::string& name) {
  constexpr std::string_view kPrefix = "layers.";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  int64_t layer = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i)
    layer = layer * 10 + (name[i] - '0');
  return layer;
}

// "per layer" lines: consecutive layers that launch the same kernels share a
// line, e.g. "layers 0-29: 5 kernels: k1 k2 k3 k4 k5".
void AppendLayerKernels(const Manifest& m, std::string* out) {
  std::map<int64_t, std::vector<int64_t>> by_layer;
  std::vector<int64_t> outside;
  bool named = false;
  for (const ManifestStep& s : m.steps) {
    named |= !s.name.empty();
    if (s.kernel < 0) continue;  // a collective between kernels
    int64_t layer = LayerOf(s.name);
    (layer < 0 ? outside : by_layer[layer]).push_back(s.kernel);
  }
  if (!named || by_layer.empty()) return;
  absl::StrAppendFormat(out, "per layer\n");
  auto symbols = [&](const std::vector<int64_t>& ks) {
    std::string s;
    for (int64_t k : ks) s += " " + m.kernels[size_t(k)].symbol;
    return s;
  };
  for (auto it = by_layer.begin(); it != by_layer.end();) {
    auto end = std::next(it);
    int64_t last = it->first;
    while (end != by_layer.end() && end->first == last + 1 && end->second == it->second)
      last = (end++)->first;
    std::string range = last == it->first ? absl::StrFormat("layer %d", it->first)
                                          : absl::StrFormat("layers %d-%d", it->first, last);
    absl::StrAppendFormat(out, "  %-14s %d kernels:%s\n", range, it->second.size(),
                          symbols(it->second));
    it = end;
  }
  if (!outside.empty())
    absl::StrAppendFormat(out, "  %-14s %d kernels:%s\n", "outside layers", outside.size(),
                          symbols(outside));
}

}  // namespace

int RunInspectCommand(int argc, char** argv) {
  bool json = false, steps = false, kernels = false;
  int64_t stage = 0, prefill = 0;
  std::string decode = "1,512", device;
  FlagSet flags(std::string(argv[0]) +
                    " ARTIFACT [--json] [--steps] [--stage N] [--kernels [--decode=B,C] "
                    "[--prefill=T] [--device=D]]",
                kInspectSummary);
  flags.AddBool("json", &json, "print the manifest (with --kernels: the kernel report) as JSON");
  flags.AddBool("kernels", &kernels,
                "report each CUDA kernel launch instead: ptxas resources, occupancy, its SASS "
                "(access widths, hot loop; needs ptxas and cuobjdump: pip install "
                "nvidia-cuda-cuobjdump) and the performance model's time per launch and step");
  flags.AddString("decode", &decode,
                  "with --kernels: evaluate a decode step of B sequences at context C");
  flags.AddInt("prefill", &prefill,
               "with --kernels: also evaluate a prefill of T tokens of one sequence (0: none)");
  flags.AddString("device", &device,
                  "with --kernels: the device the model predicts for (sm_90, h200, sm_80, a100; "
                  "default: the artifact's first CUDA arch)");
  flags.AddBool("steps", &steps, "list every kernel launch of the step plan");
  flags.AddInt("stage", &stage,
               "the pipeline stage to describe, of an artifact compiled with --pp (its kernels, "
               "buffers and weights differ per stage)");
  if (auto rc = ParseCommandLine(flags, argc, argv)) return *rc;
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "%s: expected one ARTIFACT (see --help)\n", argv[0]);
    return kExitUsage;
  }
  Artifact::OpenOptions open;
  open.verify_checksum = false;  // inspection reads the manifest, not the weights
  auto artifact = Artifact::Open(flags.positional()[0], open);
  if (artifact.ok() && stage != 0) {
    const ManifestMesh& mesh = (*artifact)->manifest().mesh;
    if (stage < 0 || stage >= mesh.pp) {
      std::fprintf(stderr, "%s: --stage %lld: the artifact has %lld pipeline stage(s)\n", argv[0],
                   static_cast<long long>(stage), static_cast<long long>(mesh.pp));
      return kExitUsage;
    }
    open.rank = int(stage * mesh.tp);  // the stage's first rank
    artifact = Artifact::Open(flags.positional()[0], open);
  }
  if (!artifact.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(artifact.status().message()).c_str());
    return 1;
  }
  const Manifest& m = (*artifact)->manifest();
  if (kernels) {
    KernelReportOptions options;
    options.json = json;
    options.device = device;
    auto shape = ParseDecodeFlag(decode);
    if (shape.ok()) {
      options.shapes.push_back(*shape);
      if (prefill != 0) shape = ParsePrefillFlag(prefill);
      if (shape.ok() && prefill != 0) options.shapes.push_back(*shape);
    }
    if (!shape.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], std::string(shape.status().message()).c_str());
      return kExitUsage;
    }
    auto report = KernelReport(**artifact, options);
    if (!report.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[0], std::string(report.status().message()).c_str());
      return 1;
    }
    std::fputs(report->c_str(), stdout);
    return 0;
  }
  if (json) {
    std::printf("%s\n", ManifestToJson(m).c_str());
    return 0;
  }
  const ModelConfig& c = m.model;
  std::string out;
  absl::StrAppendFormat(&out, "artifact %s (format %d, %s)\n", (*artifact)->dir(), m.format_version,
                        m.compiler);
  absl::StrAppendFormat(&out, "source   %s\n", m.source);
  absl::StrAppendFormat(&out,
                        "model    %s: %d layers, hidden %d, intermediate %d, heads %d/%d x %d, "
                        "vocab %d, max_position %d, rope theta %g (%s)%s\n",
                        c.architecture, c.num_layers, c.hidden_size, c.intermediate_size,
                        c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size, c.max_position,
                        c.rope_theta, ToString(c.rope_style),
                        c.tie_word_embeddings ? ", tied embeddings" : "");
  std::string targets;
  for (const auto& t : m.targets) targets += (targets.empty() ? "" : ", ") + t;
  absl::StrAppendFormat(&out, "targets  %s; activations %s, KV cache %s\n", targets,
                        m.activation_dtype, m.kv_dtype);
  std::map<std::string, std::pair<int64_t, uint64_t>> by_format;
  for (const auto& t : m.weights.tensors) {
    auto& [n, bytes] = by_format[t.format];
    ++n;
    bytes += t.bytes;
  }
  if (m.weights.dummy_seed != 0)
    absl::StrAppendFormat(&out,
                          "weights  dummy (generated at load, seed %d): %d tensors, %d bytes\n",
                          m.weights.dummy_seed, m.weights.tensors.size(), m.weights.size);
  else
    absl::StrAppendFormat(&out, "weights  %s: %d tensors, %d bytes, checksum %s\n", m.weights.file,
                          m.weights.tensors.size(), m.weights.size, m.weights.checksum);
  for (const auto& [format, v] : by_format)
    absl::StrAppendFormat(&out, "           %-6s %4d tensors %12d bytes\n", format, v.first,
                          v.second);
  int64_t launches = 0;  // kernels, not the collectives between them
  for (const auto& s : m.steps) launches += s.kernel >= 0;
  absl::StrAppendFormat(&out, "kernels  %d unique, %d launches per step (%.1f per layer)\n",
                        m.kernels.size(), launches,
                        c.num_layers > 0 ? double(launches) / double(c.num_layers) : 0.0);
  std::vector<int64_t> uses(m.kernels.size());
  for (const auto& s : m.steps)
    if (s.kernel >= 0) ++uses[size_t(s.kernel)];
  for (size_t i = 0; i < m.kernels.size(); ++i)
    absl::StrAppendFormat(&out, "  %-14s %-6s x%-4d %-36s %s\n", m.kernels[i].symbol,
                          m.kernels[i].target, uses[i], m.kernels[i].ops, m.kernels[i].launch);
  AppendLayerKernels(m, &out);
  absl::StrAppendFormat(&out, "buffers  %d (rows x bytes per row)\n", m.buffers.size());
  for (size_t i = 0; i < m.buffers.size(); ++i)
    absl::StrAppendFormat(&out, "  b%-3d %-6s x %6d bytes (%d x %s)%s\n", i, m.buffers[i].rows,
                          m.buffers[i].row_bytes, m.buffers[i].row_elems, m.buffers[i].dtype,
                          int64_t(i) == m.logits_buffer ? "  <- logits" : "");
  if (steps)
    for (size_t i = 0; i < m.steps.size(); ++i)
      absl::StrAppendFormat(&out, "  step %4d: %s\n", i, DescribeStep(m, m.steps[i]));
  AppendMeshSection(m, &out);
  AppendCudaSection(**artifact, steps, &out);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace llmc::cli
