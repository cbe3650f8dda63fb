#include "inspect_mesh.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace llmc::cli {

std::string DescribeStep(const Manifest& m, const ManifestStep& s) {
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
                        mesh.tp, mesh.pp, mesh.ranks.size(), mesh.tp * mesh.pp, mesh.kv_heads);
  for (size_t r = 0; r < mesh.ranks.size(); ++r)
    absl::StrAppendFormat(out, "  rank %-3d %s: %d bytes, checksum %s\n", r,
                          mesh.ranks[r].weights_file, mesh.ranks[r].weights_size,
                          mesh.ranks[r].weights_checksum);
  // Per token of a step (tokens rows) and per logits row: the values the
  // collectives combine (f32 on the host), and what one rank sends for them
  // with ring algorithms: an all-reduce 2 (n-1)/n of the value, an
  // all-gather (n-1)/n of the gathered row.
  const double n = double(mesh.tp);
  int64_t reduces = 0, gathers = 0;
  double token_payload = 0, token_sent = 0, logits_payload = 0, logits_sent = 0;
  for (const ManifestStep& s : m.steps) {
    if (s.collective.empty() || s.buffers.empty()) continue;
    const bool logits = m.buffers[size_t(s.buffers[1])].rows == "logits";
    const bool reduce = s.collective == "all_reduce_sum";
    const double bytes = 4.0 * double(reduce ? s.in_row_elems : s.out_row_elems);
    const double sent = reduce ? 2 * (n - 1) / n * bytes : (n - 1) / n * bytes;
    (logits ? logits_payload : token_payload) += bytes;
    (logits ? logits_sent : token_sent) += sent;
    ++(reduce ? reduces : gathers);
  }
  absl::StrAppendFormat(out,
                        "collectives %d all-reduces and %d all-gathers per step: per token %.0f "
                        "bytes combined, %.0f sent by each rank; per logits row %.0f and %.0f\n",
                        reduces, gathers, token_payload, token_sent, logits_payload, logits_sent);
}

}  // namespace llmc::cli
