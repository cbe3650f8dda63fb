#include "inspect_mesh.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace llmc::cli {

bool IsPipelineTransfer(const ManifestStep& s) {
  return s.collective == "send" || s.collective == "recv";
}

std::string DescribeStep(const Manifest& m, const ManifestStep& s) {
  if (IsPipelineTransfer(s))
    return absl::StrFormat("%s %d elements per row %s stage %d (b%d)", s.collective,
                           s.collective == "send" ? s.in_row_elems : s.out_row_elems,
                           s.collective == "send" ? "to" : "from", s.peer,
                           s.buffers.empty() ? -1 : s.buffers[0]);
  if (!s.collective.empty())
    return absl::StrFormat("%s %d -> %d elements per row (b%d -> b%d)", s.collective,
                           s.in_row_elems, s.out_row_elems, s.buffers.empty() ? -1 : s.buffers[0],
                           s.buffers.size() < 2 ? -1 : s.buffers[1]);
  if (s.kernel < 0 || size_t(s.kernel) >= m.kernels.size()) return "(no kernel)";
  return m.kernels[size_t(s.kernel)].ops;
}

void AppendMeshSection(const Manifest& m, std::string* out) {
  const ManifestMesh& mesh = m.mesh;
  if (mesh.tp * mesh.pp <= 1) return;
  absl::StrAppendFormat(out,
                        "mesh     tp %d x pp %d: %d ranks (mpirun -np %d), %d KV heads per rank\n",
                        mesh.tp, mesh.pp, mesh.tp * mesh.pp, mesh.tp * mesh.pp, mesh.kv_heads);
  for (size_t s = 0; s < mesh.stages.size(); ++s) {
    const ManifestStage& st = mesh.stages[s];
    absl::StrAppendFormat(
        out, "  stage %-3d layers %d-%d, ranks %d-%d: %s%s\n", s, st.first_layer,
        st.first_layer + st.num_layers - 1, int64_t(s) * mesh.tp, (int64_t(s) + 1) * mesh.tp - 1,
        st.manifest, int64_t(s) == mesh.stage ? "  <- shown here (--stage N for another)" : "");
  }
  for (size_t r = 0; r < mesh.ranks.size(); ++r)
    absl::StrAppendFormat(out, "  rank %-3d %s: %d bytes, checksum %s\n",
                          mesh.stage * mesh.tp + int64_t(r), mesh.ranks[r].weights_file,
                          mesh.ranks[r].weights_size, mesh.ranks[r].weights_checksum);
  // Per token of a step (tokens rows) and per logits row: the values the
  // collectives combine (f32 on the host), and what one rank sends for them
  // with ring algorithms: an all-reduce 2 (n-1)/n of the value, an
  // all-gather (n-1)/n of the gathered row.
  const double n = double(mesh.tp);
  int64_t reduces = 0, gathers = 0;
  double token_payload = 0, token_sent = 0, logits_payload = 0, logits_sent = 0;
  for (const ManifestStep& s : m.steps) {
    if (IsPipelineTransfer(s)) {
      absl::StrAppendFormat(out, "pipeline %s the hidden state %s stage %d: %d bytes per token\n",
                            s.collective == "send" ? "sends" : "receives",
                            s.collective == "send" ? "to" : "from", s.peer,
                            4 * (s.collective == "send" ? s.in_row_elems : s.out_row_elems));
      continue;
    }
    if (s.collective.empty() || s.buffers.size() < 2) continue;
    const bool logits = m.buffers[size_t(s.buffers[1])].rows == "logits";
    const bool reduce = s.collective == "all_reduce_sum";
    const double bytes = 4.0 * double(reduce ? s.in_row_elems : s.out_row_elems);
    const double sent = reduce ? 2 * (n - 1) / n * bytes : (n - 1) / n * bytes;
    (logits ? logits_payload : token_payload) += bytes;
    (logits ? logits_sent : token_sent) += sent;
    ++(reduce ? reduces : gathers);
  }
  if (mesh.tp < 2) return;
  absl::StrAppendFormat(out,
                        "collectives %d all-reduces and %d all-gathers per step: per token %.0f "
                        "bytes combined, %.0f sent by each rank; per logits row %.0f and %.0f\n",
                        reduces, gathers, token_payload, token_sent, logits_payload, logits_sent);
}

}  // namespace llmc::cli
