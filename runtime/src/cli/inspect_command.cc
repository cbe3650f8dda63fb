#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_format.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/cli/commands.h"
#include "llmc/runtime/cli/flags.h"
#include "run_command.h"

namespace llmc::cli {

int RunInspectCommand(int argc, char** argv) {
  bool json = false, steps = false;
  FlagSet flags(std::string(argv[0]) + " ARTIFACT [--json] [--steps]", kInspectSummary);
  flags.AddBool("json", &json, "print the manifest as JSON");
  flags.AddBool("steps", &steps, "list every kernel launch of the step plan");
  if (auto st = flags.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(st.message()).c_str());
    return kExitUsage;
  }
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "%s: expected one ARTIFACT (see --help)\n", argv[0]);
    return kExitUsage;
  }
  Artifact::OpenOptions open;
  open.verify_checksum = false;  // inspection reads the manifest, not the weights
  auto artifact = Artifact::Open(flags.positional()[0], open);
  if (!artifact.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(artifact.status().message()).c_str());
    return 1;
  }
  const Manifest& m = (*artifact)->manifest();
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
  absl::StrAppendFormat(&out, "weights  %s: %d tensors, %d bytes, checksum %s\n", m.weights.file,
                        m.weights.tensors.size(), m.weights.size, m.weights.checksum);
  for (const auto& [format, v] : by_format)
    absl::StrAppendFormat(&out, "           %-6s %4d tensors %12d bytes\n", format, v.first, v.second);
  absl::StrAppendFormat(&out, "kernels  %d unique, %d launches per step (%.1f per layer)\n",
                        m.kernels.size(), m.steps.size(),
                        c.num_layers > 0 ? double(m.steps.size()) / double(c.num_layers) : 0.0);
  std::vector<int64_t> uses(m.kernels.size());
  for (const auto& s : m.steps) ++uses[size_t(s.kernel)];
  for (size_t i = 0; i < m.kernels.size(); ++i)
    absl::StrAppendFormat(&out, "  %-14s %-6s x%-4d %-36s %s\n", m.kernels[i].symbol,
                          m.kernels[i].target, uses[i], m.kernels[i].ops, m.kernels[i].launch);
  absl::StrAppendFormat(&out, "buffers  %d (rows x bytes per row)\n", m.buffers.size());
  for (size_t i = 0; i < m.buffers.size(); ++i)
    absl::StrAppendFormat(&out, "  b%-3d %-6s x %6d bytes (%d x %s)%s\n", i, m.buffers[i].rows,
                          m.buffers[i].row_bytes, m.buffers[i].row_elems, m.buffers[i].dtype,
                          int64_t(i) == m.logits_buffer ? "  <- logits" : "");
  if (steps)
    for (size_t i = 0; i < m.steps.size(); ++i)
      absl::StrAppendFormat(&out, "  step %4d: %s\n", i, m.kernels[size_t(m.steps[i].kernel)].ops);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace llmc::cli
