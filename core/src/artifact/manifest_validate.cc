// manifest.json's checks: what ValidateManifest (and so ManifestFromJson and
// WriteManifest) require before the runtime trusts any index, offset or byte
// count of a manifest.
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "llmc/core/artifact/cuda_launch_expr.h"
#include "llmc/core/artifact/manifest.h"
#include "llmc/core/weight_format.h"
#include "manifest_internal.h"

namespace llmc {
namespace {

using artifact_internal::Field;
using artifact_internal::Indexed;
using artifact_internal::ModelError;

bool IsTarget(const std::string& t) {
  if (t == "host") return true;
  // sm_<digits>[a-z]: sm_80, sm_90, sm_90a.
  if (t.size() < 4 || t.compare(0, 3, "sm_") != 0) return false;
  size_t i = 3;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  if (i == 3) return false;
  return i == t.size() || (i + 1 == t.size() && t[i] >= 'a' && t[i] <= 'z');
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Bytes per element of a buffer's dtype (MLIR's spelling); 0 if unknown.
int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "f64" || dtype == "i64") return 8;
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16") return 2;
  if (dtype == "i8") return 1;
  return 0;
}

bool IsFloatDtype(const std::string& dtype) {
  return dtype == "f32" || dtype == "f16" || dtype == "bf16";
}

// A path inside the artifact: relative, no "..", no empty components.
std::string RelativePathProblem(const std::string& p) {
  if (p.empty()) return "is empty";
  if (p.find('\0') != std::string::npos) return "contains a NUL byte";
  if (p[0] == '/')
    return absl::StrCat("'", p, "' is absolute; it must be relative to the artifact");
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string_view part(p.data() + start, end - start);
    if (part == "..") return absl::StrCat("'", p, "' leaves the artifact (contains '..')");
    if (part.empty() || part == ".") return absl::StrCat("'", p, "' is not a plain relative path");
    start = end + 1;
  }
  return "";
}

bool IsChecksumHex(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

class Validator {
 public:
  Validator(const Manifest& m, const std::string& path) : m_(m), path_(path) {}

  absl::Status Error(const std::string& field, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", field, " ", why));
  }

  absl::Status Run() {
    if (m_.format_version != kArtifactFormatVersion)
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: format_version %d is not supported by this runtime (it reads version %d); "
          "recompile the model with this llmc",
          path_, m_.format_version, kArtifactFormatVersion));
    if (m_.host_abi_version < 0)
      return Error("host_abi_version", absl::StrCat("must be >= 0, got ", m_.host_abi_version));
    if (auto st = ValidateModelConfig(m_.model); !st.ok()) return ModelError(path_, st);
    using Check = absl::Status (Validator::*)();
    for (Check check : {&Validator::Targets, &Validator::Dtypes, &Validator::Weights,
                        &Validator::Mesh, &Validator::Buffers, &Validator::Kernels,
                        &Validator::Steps, &Validator::Cuda, &Validator::Rest}) {
      if (auto st = (this->*check)(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Targets() {
    if (m_.targets.empty()) return Error("targets", "is empty: the artifact has no kernels to run");
    std::set<std::string> seen;
    for (size_t i = 0; i < m_.targets.size(); ++i) {
      const std::string& t = m_.targets[i];
      if (!IsTarget(t))
        return Error(Indexed("targets", i),
                     absl::StrCat("'", t, "' is not a target (host, sm_80, sm_90, ...)"));
      if (!seen.insert(t).second)
        return Error(Indexed("targets", i), absl::StrCat("'", t, "' is listed twice"));
      if (t == "host") has_host_ = true;
    }
    return absl::OkStatus();
  }

  absl::Status Dtypes() {
    for (auto [field, value] : {std::pair{"activation_dtype", &m_.activation_dtype},
                                std::pair{"kv_dtype", &m_.kv_dtype}}) {
      if (!IsFloatDtype(*value))
        return Error(field, absl::StrCat("is '", *value, "'; expected f32, f16 or bf16"));
    }
    return absl::OkStatus();
  }

  absl::Status Weights() {
    const ManifestWeights& w = m_.weights;
    if (w.dummy_seed != 0) {
      // Dummy weights are generated at load: nothing on disk to name or hash.
      if (!w.file.empty())
        return Error("weights.file", absl::StrCat("is '", w.file,
                                                  "' but weights.dummy_seed is set: dummy "
                                                  "weights have no file"));
      if (!w.checksum.empty())
        return Error("weights.checksum", "must be empty: weights.dummy_seed is set (no file)");
    } else {
      if (w.file.empty())
        return Error("weights.file",
                     "is empty: real weights need a weight file (only weights.dummy_seed "
                     "artifacts have none)");
      if (std::string why = RelativePathProblem(w.file); !why.empty())
        return Error("weights.file", why);
      if (!IsChecksumHex(w.checksum))
        return Error("weights.checksum",
                     absl::StrCat("'", w.checksum, "' is not 16 lowercase hex digits"));
    }
    std::set<std::string> names;
    for (size_t i = 0; i < w.tensors.size(); ++i) {
      if (auto st = Tensor(i); !st.ok()) return st;
      if (!names.insert(w.tensors[i].name).second)
        return Error(TensorField(i, "name"), "is used by an earlier tensor too");
    }
    // No two tensors share a byte.
    std::vector<size_t> order(w.tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return w.tensors[a].offset != w.tensors[b].offset ? w.tensors[a].offset < w.tensors[b].offset
                                                        : a < b;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const ManifestTensor& prev = w.tensors[order[k - 1]];
      const ManifestTensor& next = w.tensors[order[k]];
      if (prev.offset + prev.bytes > next.offset) {
        size_t a = std::min(order[k - 1], order[k]), b = std::max(order[k - 1], order[k]);
        return Error(
            TensorField(b, "offset"),
            absl::StrFormat("overlaps weights.tensors[%d] ('%s'): bytes [%d, %d) and [%d, %d)", a,
                            w.tensors[a].name, w.tensors[a].offset,
                            w.tensors[a].offset + w.tensors[a].bytes, w.tensors[b].offset,
                            w.tensors[b].offset + w.tensors[b].bytes));
      }
    }
    return absl::OkStatus();
  }

  std::string TensorField(size_t i, const char* key) const {
    return absl::StrCat("weights.tensors[", i, "] ('", m_.weights.tensors[i].name, "').", key);
  }

  absl::Status Tensor(size_t i) {
    const ManifestTensor& t = m_.weights.tensors[i];
    if (t.name.empty()) return Error(absl::StrCat("weights.tensors[", i, "].name"), "is empty");
    std::string field, why;
    if (!artifact_internal::CheckTensorLayout(t, &field, &why))
      return Error(TensorField(i, field.c_str()), why);
    if (t.offset % kWeightAlignment != 0)
      return Error(TensorField(i, "offset"),
                   absl::StrCat(t.offset, " is not a multiple of ", kWeightAlignment));
    if (t.offset > m_.weights.size || t.bytes > m_.weights.size - t.offset)
      return Error(TensorField(i, "offset"),
                   absl::StrCat(t.offset, " + ", t.bytes, " bytes runs past the end of ",
                                m_.weights.file.empty() ? "the dummy weights" : m_.weights.file,
                                " (weights.size ", m_.weights.size, ")"));
    return absl::OkStatus();
  }

  // The partitioning (after Weights: every rank's file has their layout).
  absl::Status Mesh() {
    const ManifestMesh& mesh = m_.mesh;
    if (mesh.tp < 1) return Error("mesh.tp", absl::StrCat("must be >= 1, got ", mesh.tp));
    if (mesh.pp < 1) return Error("mesh.pp", absl::StrCat("must be >= 1, got ", mesh.pp));
    if (mesh.tp == 1 && mesh.pp == 1) {
      if (!mesh.ranks.empty())
        return Error("mesh.ranks", absl::StrCat("has ", mesh.ranks.size(),
                                                " entries, but the artifact is not partitioned "
                                                "(mesh.tp 1, mesh.pp 1)"));
      return absl::OkStatus();
    }
    if (mesh.pp > 1) {
      if (auto st = Stages(); !st.ok()) return st;
    } else if (mesh.stage != 0 || !mesh.stages.empty()) {
      return Error("mesh.stages", "are given, but the artifact has one pipeline stage (mesh.pp 1)");
    }
    // Each stage's manifest lists its own tp ranks.
    if (mesh.ranks.size() != static_cast<uint64_t>(mesh.tp))
      return Error("mesh.ranks", absl::StrCat("has ", mesh.ranks.size(), " entries; mesh.tp ",
                                              mesh.tp, " needs one per tensor-parallel rank"));
    if (mesh.kv_heads < 1 || mesh.kv_heads > m_.model.num_kv_heads)
      return Error("mesh.kv_heads",
                   absl::StrCat("is ", mesh.kv_heads, "; expected 1 to model.num_kv_heads (",
                                m_.model.num_kv_heads, ")"));
    // The runtime generates dummy weights unsliced: it has nothing to split them by.
    if (m_.weights.dummy_seed != 0)
      return Error("weights.dummy_seed",
                   absl::StrCat("is set, but the artifact is partitioned (mesh.tp ", mesh.tp,
                                "): dummy weights are not supported with a mesh"));
    for (size_t i = 0; i < mesh.ranks.size(); ++i) {
      const ManifestMeshRank& rank = mesh.ranks[i];
      std::string f = Indexed("mesh.ranks", i);
      if (std::string why = RelativePathProblem(rank.weights_file); !why.empty())
        return Error(f + ".weights_file", why);
      // weights.tensors' offsets index every rank's file.
      if (rank.weights_size != m_.weights.size)
        return Error(f + ".weights_size", absl::StrCat("is ", rank.weights_size,
                                                       " but weights.size is ", m_.weights.size,
                                                       ": every rank's file has the layout of "
                                                       "weights.tensors"));
      if (!IsChecksumHex(rank.weights_checksum))
        return Error(f + ".weights_checksum",
                     absl::StrCat("'", rank.weights_checksum, "' is not 16 lowercase hex digits"));
    }
    return absl::OkStatus();
  }

  // The pipeline stages (mesh.pp > 1): contiguous layer ranges covering the
  // model, stage 0's manifest the root one.
  absl::Status Stages() {
    const ManifestMesh& mesh = m_.mesh;
    if (mesh.stages.size() != static_cast<uint64_t>(mesh.pp))
      return Error("mesh.stages", absl::StrCat("has ", mesh.stages.size(), " entries; mesh.pp ",
                                               mesh.pp, " needs one per stage"));
    if (mesh.stage < 0 || mesh.stage >= mesh.pp)
      return Error("mesh.stage", absl::StrCat("is ", mesh.stage, "; expected 0 to ", mesh.pp - 1));
    int64_t next = 0;
    std::set<std::string> files;
    for (size_t i = 0; i < mesh.stages.size(); ++i) {
      const ManifestStage& st = mesh.stages[i];
      std::string f = Indexed("mesh.stages", i);
      if (std::string why = RelativePathProblem(st.manifest); !why.empty())
        return Error(f + ".manifest", why);
      if ((i == 0) != (st.manifest == kManifestFile))
        return Error(f + ".manifest",
                     absl::StrCat("is '", st.manifest, "'; stage 0, and only it, is ",
                                  kManifestFile, " at the root"));
      if (!files.insert(st.manifest).second)
        return Error(f + ".manifest",
                     absl::StrCat("'", st.manifest, "' is an earlier stage's too"));
      if (st.first_layer != next || st.num_layers < 1)
        return Error(f, absl::StrCat("has layers ", st.first_layer, " + ", st.num_layers,
                                     "; expected layers from ", next, ", at least one"));
      next += st.num_layers;
    }
    if (next != m_.model.num_layers)
      return Error("mesh.stages",
                   absl::StrCat("cover ", next, " layers; the model has ", m_.model.num_layers));
    return absl::OkStatus();
  }

  // A pipeline stage before the last computes no logits.
  bool SendsOn() const { return m_.mesh.pp > 1 && m_.mesh.stage < m_.mesh.pp - 1; }

  absl::Status Buffers() {
    std::set<std::string> names;
    for (size_t i = 0; i < m_.buffers.size(); ++i) {
      const ManifestBuffer& b = m_.buffers[i];
      std::string f = Indexed("buffers", i);
      if (b.name.empty()) return Error(f + ".name", "is empty");
      if (!names.insert(b.name).second)
        return Error(f + ".name", absl::StrCat("'", b.name, "' is used by an earlier buffer too"));
      if (b.rows != "tokens" && b.rows != "logits")
        return Error(f + ".rows", absl::StrCat("is '", b.rows, "'; expected tokens or logits"));
      int64_t elem = DtypeBytes(b.dtype);
      if (elem == 0)
        return Error(
            f + ".dtype",
            absl::StrCat("is '", b.dtype, "'; expected f32, f16, bf16, f64 or i8/i16/i32/i64"));
      if (b.row_elems <= 0 || b.row_elems > (int64_t{1} << 40))
        return Error(f + ".row_elems", absl::StrCat("must be positive, got ", b.row_elems));
      if (b.row_bytes < b.row_elems * elem || b.row_bytes > (int64_t{1} << 44))
        return Error(f + ".row_bytes",
                     absl::StrCat("is ", b.row_bytes, " but ", b.row_elems, " ", b.dtype,
                                  " elements take ", b.row_elems * elem));
    }
    if (SendsOn()) {
      if (m_.logits_buffer != -1)
        return Error("logits_buffer",
                     absl::StrCat("is ", m_.logits_buffer, "; pipeline stage ", m_.mesh.stage,
                                  " of ", m_.mesh.pp, " computes no logits (-1)"));
      return absl::OkStatus();
    }
    if (m_.logits_buffer < 0 || m_.logits_buffer >= static_cast<int64_t>(m_.buffers.size()))
      return Error("logits_buffer",
                   absl::StrCat(m_.logits_buffer, " is out of range: the manifest has ",
                                m_.buffers.size(), " buffers"));
    const ManifestBuffer& logits = m_.buffers[m_.logits_buffer];
    if (logits.rows != "logits" || logits.dtype != "f32" || logits.row_elems != m_.model.vocab_size)
      return Error(
          "logits_buffer",
          absl::StrCat("names buffer '", logits.name, "' (rows ", logits.rows, ", ", logits.dtype,
                       " x ", logits.row_elems, "); the logits are rows 'logits' of f32 x ",
                       m_.model.vocab_size, " (vocab_size)"));
    return absl::OkStatus();
  }

  absl::Status Kernels() {
    for (size_t i = 0; i < m_.kernels.size(); ++i) {
      const ManifestKernel& k = m_.kernels[i];
      std::string f = Indexed("kernels", i);
      if (k.name.empty()) return Error(f + ".name", "is empty");
      if (std::find(m_.targets.begin(), m_.targets.end(), k.target) == m_.targets.end())
        return Error(f + ".target", absl::StrCat("'", k.target, "' is not one of targets (",
                                                 absl::StrJoin(m_.targets, ", "), ")"));
      if (!IsIdentifier(k.symbol))
        return Error(f + ".symbol", absl::StrCat("'", k.symbol, "' is not a C identifier"));
    }
    return absl::OkStatus();
  }

  absl::Status Steps() { return StepList("steps", m_.steps, "kernels", m_.kernels.size()); }

  // The index ranges of a step plan (`field`: "steps" or "cuda.steps"), whose
  // `kernel` indexes the list `kernels` of `num_kernels` entries.
  absl::Status StepList(const std::string& field, const std::vector<ManifestStep>& steps,
                        const char* kernels, size_t num_kernels) {
    const int64_t layers =
        m_.mesh.pp > 1 ? m_.mesh.stages[size_t(m_.mesh.stage)].num_layers : m_.model.num_layers;
    auto check = [&](const std::string& field, int64_t value, size_t count, const char* what) {
      if (value >= 0 && static_cast<uint64_t>(value) < count) return absl::OkStatus();
      return Error(field,
                   absl::StrCat(value, " is out of range: ", what, " has ", count, " entries"));
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      const ManifestStep& s = steps[i];
      std::string f = Indexed(field, i);
      if (!s.collective.empty()) {
        if (auto st = Collective(s, f); !st.ok()) return st;
        continue;
      }
      if (auto st = check(f + ".kernel", s.kernel, num_kernels, kernels); !st.ok()) return st;
      for (size_t k = 0; k < s.buffers.size(); ++k)
        if (auto st = check(Indexed(f + ".buffers", k), s.buffers[k], m_.buffers.size(), "buffers");
            !st.ok())
          return st;
      for (size_t k = 0; k < s.weights.size(); ++k)
        if (auto st = check(Indexed(f + ".weights", k), s.weights[k], m_.weights.tensors.size(),
                            "weights.tensors");
            !st.ok())
          return st;
      for (size_t k = 0; k < s.caches.size(); ++k)
        if (auto st = check(Indexed(f + ".caches", k), s.caches[k], static_cast<size_t>(layers),
                            m_.mesh.pp > 1 ? "the stage's layer list" : "the model's layer list");
            !st.ok())
          return st;
    }
    return PipelineEnds(field, steps);
  }

  // A stage after the first receives its hidden state once, and a stage
  // before the last sends it on once, as its plan's last step.
  absl::Status PipelineEnds(const std::string& field, const std::vector<ManifestStep>& steps) {
    if (steps.empty()) return absl::OkStatus();  // no plan (a host-only artifact's cuda.steps)
    int64_t recvs = 0, sends = 0;
    for (const ManifestStep& s : steps) {
      recvs += s.collective == "recv";
      sends += s.collective == "send";
    }
    const int64_t stage = m_.mesh.stage, pp = m_.mesh.pp;
    if (recvs != (stage > 0 ? 1 : 0) || sends != (stage < pp - 1 ? 1 : 0))
      return Error(field, absl::StrCat("has ", recvs, " recv and ", sends,
                                       " send steps; pipeline stage ", stage, " of ", pp, " needs ",
                                       stage > 0 ? 1 : 0, " and ", stage < pp - 1 ? 1 : 0));
    if (sends == 1 && steps.back().collective != "send")
      return Error(field, "does not end with its send step: the hidden state leaves last");
    return absl::OkStatus();
  }

  // A collective step `f` (s.collective set): what it moves must be the same
  // rows on every rank, and only a tensor-parallel artifact has ranks to move
  // them between.
  absl::Status Collective(const ManifestStep& s, const std::string& f) {
    if (s.collective == "send" || s.collective == "recv") return PipelineTransfer(s, f);
    if (s.peer != -1)
      return Error(f + ".peer", absl::StrCat("is ", s.peer, "; only send and recv have a peer"));
    const bool reduce = s.collective == "all_reduce_sum";
    if (!reduce && s.collective != "all_gather")
      return Error(f + ".collective", absl::StrCat("is '", s.collective,
                                                   "'; expected all_reduce_sum, all_gather, send "
                                                   "or recv"));
    if (m_.mesh.tp < 2)
      return Error(f + ".collective",
                   absl::StrCat("is ", s.collective,
                                ", but the artifact has one tensor-parallel rank (mesh.tp ",
                                m_.mesh.tp, "): collectives need a tensor-parallel mesh"));
    if (s.kernel != -1)
      return Error(f + ".kernel", absl::StrCat("is ", s.kernel, "; a collective step (",
                                               s.collective, ") has kernel -1"));
    if (!s.weights.empty())
      return Error(f + ".weights", absl::StrCat("has ", s.weights.size(),
                                                " entries; a collective step binds no weights"));
    if (!s.caches.empty())
      return Error(f + ".caches", absl::StrCat("has ", s.caches.size(),
                                               " entries; a collective step binds no caches"));
    if (s.buffers.size() != 2)
      return Error(f + ".buffers", absl::StrCat("has ", s.buffers.size(),
                                                " entries; a collective step binds 2 (input, "
                                                "output)"));
    for (size_t k = 0; k < 2; ++k)
      if (s.buffers[k] < 0 || static_cast<uint64_t>(s.buffers[k]) >= m_.buffers.size())
        return Error(Indexed(f + ".buffers", k),
                     absl::StrCat(s.buffers[k], " is out of range: buffers has ", m_.buffers.size(),
                                  " entries"));
    const ManifestBuffer& in = m_.buffers[s.buffers[0]];
    const ManifestBuffer& out = m_.buffers[s.buffers[1]];
    auto describe = [](const char* role, const ManifestBuffer& b) {
      return absl::StrCat(role, " '", b.name, "' (rows ", b.rows, ", row_bytes ", b.row_bytes, ")");
    };
    std::string pair = absl::StrCat(describe("input", in), " and ", describe("output", out));
    if (in.rows != out.rows)
      return Error(f + ".buffers",
                   absl::StrCat(pair, " differ in rows; ", s.collective, " needs the same rows"));
    // Rows are packed at the values' widths (a buffer's row_bytes is the
    // widest value it ever holds), so the widths must fit the buffers.
    auto fits = [](int64_t elems, const ManifestBuffer& b) {
      return elems > 0 && elems <= b.row_elems;
    };
    if (!fits(s.in_row_elems, in) || !fits(s.out_row_elems, out))
      return Error(f + ".in_row_elems",
                   absl::StrCat("is ", s.in_row_elems, " and out_row_elems ", s.out_row_elems,
                                ": both must be positive and fit the ", pair, " (row_elems ",
                                in.row_elems, " and ", out.row_elems, ")"));
    if (reduce && s.in_row_elems != s.out_row_elems)
      return Error(f + ".out_row_elems",
                   absl::StrCat("is ", s.out_row_elems, " but in_row_elems is ", s.in_row_elems,
                                ": all_reduce_sum keeps the row width"));
    if (!reduce && (s.out_row_elems > m_.mesh.tp * s.in_row_elems ||
                    s.out_row_elems <= (m_.mesh.tp - 1) * s.in_row_elems))
      return Error(f + ".out_row_elems",
                   absl::StrCat("is ", s.out_row_elems, ": an all_gather of ", m_.mesh.tp,
                                " rows of ", s.in_row_elems,
                                " fills more than all but the last and at most all of them"));
    return absl::OkStatus();
  }

  // A send or recv step `f` between pipeline stages: one buffer of token
  // rows (the hidden state), to the next stage or from the previous one.
  absl::Status PipelineTransfer(const ManifestStep& s, const std::string& f) {
    const bool send = s.collective == "send";
    const int64_t stage = m_.mesh.stage, pp = m_.mesh.pp;
    if (pp < 2)
      return Error(f + ".collective", absl::StrCat("is ", s.collective,
                                                   ", but the artifact has one pipeline stage "
                                                   "(mesh.pp ",
                                                   pp, ")"));
    const int64_t peer = send ? stage + 1 : stage - 1;
    if (s.peer != peer || peer < 0 || peer >= pp)
      return Error(
          f + ".peer",
          absl::StrCat("is ", s.peer, "; stage ", stage, " ", send ? "sends to" : "receives from",
                       " stage ", peer, peer < 0 || peer >= pp ? ", which does not exist" : ""));
    if (s.kernel != -1 || !s.weights.empty() || !s.caches.empty())
      return Error(f, absl::StrCat("binds a kernel, weights or caches; a ", s.collective,
                                   " step binds one buffer (kernel -1)"));
    if (s.buffers.size() != 1 || s.buffers[0] < 0 ||
        static_cast<uint64_t>(s.buffers[0]) >= m_.buffers.size())
      return Error(f + ".buffers", absl::StrCat("must be one index into buffers (",
                                                m_.buffers.size(), " entries)"));
    const ManifestBuffer& b = m_.buffers[s.buffers[0]];
    const int64_t width = send ? s.in_row_elems : s.out_row_elems;
    const int64_t other = send ? s.out_row_elems : s.in_row_elems;
    if (b.rows != "tokens" || width <= 0 || width > b.row_elems || other != 0)
      return Error(f + (send ? ".in_row_elems" : ".out_row_elems"),
                   absl::StrCat("is ", width, " (and the other width ", other, ") for buffer '",
                                b.name, "' (rows ", b.rows, ", row_elems ", b.row_elems, "); a ",
                                s.collective, " moves token rows that fit its buffer"));
    return absl::OkStatus();
  }

  // The CUDA section: empty for a host-only artifact; else its modules (one
  // per sm_XX target), kernels with parseable launches, and a step plan whose
  // bindings fit cuda_abi.h's fixed arrays.
  absl::Status Cuda() {
    const ManifestCuda& c = m_.cuda;
    if (c.modules.empty()) {
      if (!c.kernels.empty() || !c.steps.empty())
        return Error("cuda.modules", absl::StrCat("is empty, but cuda has ", c.kernels.size(),
                                                  " kernels and ", c.steps.size(), " steps"));
      return absl::OkStatus();
    }
    if (!IsFloatDtype(c.activation_dtype))
      return Error("cuda.activation_dtype",
                   absl::StrCat("is '", c.activation_dtype, "'; expected bf16, f16 or f32"));
    if (c.cuda_abi_version < 1)
      return Error("cuda.cuda_abi_version", absl::StrCat("must be >= 1, got ", c.cuda_abi_version));
    if (auto st = CudaModules(); !st.ok()) return st;
    if (auto st = CudaKernels(); !st.ok()) return st;
    if (auto st = CudaSamplers(); !st.ok()) return st;
    // Collectives are checked as the host plan's are (the runtime's CUDA
    // executor refuses a partitioned artifact until it speaks NCCL).
    if (auto st = StepList("cuda.steps", c.steps, "cuda.kernels", c.kernels.size()); !st.ok())
      return st;
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const ManifestStep& s = c.steps[i];
      std::string f = Indexed("cuda.steps", i);
      if (!s.collective.empty()) continue;
      if (s.buffers.size() > LLMC_CUDA_MAX_BUFFERS)
        return Error(f + ".buffers", absl::StrCat("has ", s.buffers.size(), " entries; a launch ",
                                                  "binds at most ", LLMC_CUDA_MAX_BUFFERS));
      if (s.weights.size() > LLMC_CUDA_MAX_WEIGHTS)
        return Error(f + ".weights", absl::StrCat("has ", s.weights.size(), " entries; a launch ",
                                                  "binds at most ", LLMC_CUDA_MAX_WEIGHTS));
      if (s.caches.size() > 1)
        return Error(f + ".caches", absl::StrCat("has ", s.caches.size(),
                                                 " entries; a launch binds one layer's K and V"));
    }
    return absl::OkStatus();
  }

  // The device sampler's entries: known kinds, each once, and launchable
  // blocks (whole warps, at most 1024 threads).
  absl::Status CudaSamplers() {
    const std::vector<ManifestCudaSampler>& samplers = m_.cuda.samplers;
    for (size_t i = 0; i < samplers.size(); ++i) {
      const ManifestCudaSampler& s = samplers[i];
      std::string f = Indexed("cuda.samplers", i);
      if (s.kind != "sample" && s.kind != "feed")
        return Error(f + ".kind",
                     absl::StrCat("'", s.kind, "' is not a sampler kind (sample, feed)"));
      for (size_t j = 0; j < i; ++j)
        if (samplers[j].kind == s.kind)
          return Error(f + ".kind", absl::StrCat("'", s.kind, "' has an earlier entry too"));
      if (s.symbol.empty()) return Error(f + ".symbol", "is empty");
      if (s.block < 32 || s.block > 1024 || s.block % 32 != 0)
        return Error(f + ".block", absl::StrCat("must be a multiple of 32 in [32, 1024], got ",
                                                s.block));
    }
    return absl::OkStatus();
  }

  absl::Status CudaModules() {
    const ManifestCuda& c = m_.cuda;
    std::set<std::string> archs;
    for (size_t i = 0; i < c.modules.size(); ++i) {
      const ManifestCudaModule& mod = c.modules[i];
      std::string f = Indexed("cuda.modules", i);
      if (mod.arch.compare(0, 3, "sm_") != 0 || !IsTarget(mod.arch))
        return Error(f + ".arch",
                     absl::StrCat("'", mod.arch, "' is not a CUDA target (sm_80, ...)"));
      if (std::find(m_.targets.begin(), m_.targets.end(), mod.arch) == m_.targets.end())
        return Error(f + ".arch", absl::StrCat("'", mod.arch, "' is not one of targets (",
                                               absl::StrJoin(m_.targets, ", "), ")"));
      if (!archs.insert(mod.arch).second)
        return Error(f + ".arch", absl::StrCat("'", mod.arch, "' has an earlier module too"));
      if (std::string why = RelativePathProblem(mod.file); !why.empty())
        return Error(f + ".file", why);
      if (!IsChecksumHex(mod.checksum))
        return Error(f + ".checksum",
                     absl::StrCat("'", mod.checksum, "' is not 16 lowercase hex digits"));
      for (size_t k = 0; k < mod.ptxas.size(); ++k)
        if (!IsIdentifier(mod.ptxas[k].symbol))
          return Error(Indexed(f + ".ptxas", k) + ".symbol",
                       absl::StrCat("'", mod.ptxas[k].symbol, "' is not a C identifier"));
    }
    // The backend picks a module by target name: every CUDA target has one.
    for (size_t i = 0; i < m_.targets.size(); ++i)
      if (m_.targets[i].compare(0, 3, "sm_") == 0 && !archs.count(m_.targets[i]))
        return Error(Indexed("targets", i),
                     absl::StrCat("'", m_.targets[i], "' has no module in cuda.modules"));
    return absl::OkStatus();
  }

  absl::Status CudaGemm(const ManifestCudaGemm& g, const std::string& f, const std::string& kf) {
    constexpr int64_t kMaxDim = int64_t{1} << 24;
    if (g.operand_k < 0 || g.operand_k > kMaxDim)
      return Error(kf + ".operand_k", absl::StrCat("is ", g.operand_k, "; expected 0 to ", kMaxDim));
    if (g.operand_k > 0 && g.operand_rows != "T" && g.operand_rows != "L")
      return Error(kf + ".operand_rows",
                   absl::StrCat("is '", g.operand_rows, "'; expected T or L"));
    if (g.n == 0) return absl::OkStatus();
    for (auto [key, v] :
         {std::pair{"n", g.n}, std::pair{"k", g.k}, std::pair{"columns", g.columns}})
      if (v <= 0 || v > kMaxDim)
        return Error(f + "." + key, absl::StrCat("is ", v, "; expected 1 to ", kMaxDim));
    if (g.weight < 0 || g.weight >= LLMC_CUDA_MAX_WEIGHTS)
      return Error(f + ".weight",
                   absl::StrCat("is ", g.weight, "; expected 0 to ", LLMC_CUDA_MAX_WEIGHTS - 1));
    if (g.rows != "T" && g.rows != "L")
      return Error(f + ".rows", absl::StrCat("is '", g.rows, "'; expected T or L"));
    for (auto [key, v] : {std::pair{"pre", &g.pre}, std::pair{"epi", &g.epi}})
      if (!IsIdentifier(*v))
        return Error(f + "." + key, absl::StrCat("'", *v, "' is not a C identifier"));
    if (!g.deq.empty() && !IsIdentifier(g.deq))
      return Error(f + ".deq", absl::StrCat("'", g.deq, "' is not a C identifier"));
    return absl::OkStatus();
  }

  absl::Status CudaKernels() {
    for (size_t i = 0; i < m_.cuda.kernels.size(); ++i) {
      const ManifestCudaKernel& k = m_.cuda.kernels[i];
      std::string f = Indexed("cuda.kernels", i);
      if (k.name.empty()) return Error(f + ".name", "is empty");
      if (k.launches.empty()) return Error(f + ".launches", "is empty");
      for (size_t l = 0; l < k.launches.size(); ++l) {
        const ManifestCudaLaunch& launch = k.launches[l];
        std::string lf = Indexed(f + ".launches", l);
        if (!IsIdentifier(launch.symbol))
          return Error(lf + ".symbol", absl::StrCat("'", launch.symbol, "' is not a C identifier"));
        if (auto when = ParseWhenExpr(launch.when); !when.ok())
          return Error(lf + ".when", std::string(when.status().message()));
        if (launch.grid.size() != 3)
          return Error(lf + ".grid",
                       absl::StrCat("has ", launch.grid.size(), " entries; expected 3 (x, y, z)"));
        for (size_t d = 0; d < 3; ++d)
          if (auto grid = ParseGridExpr(launch.grid[d]); !grid.ok())
            return Error(Indexed(lf + ".grid", d), std::string(grid.status().message()));
        if (launch.block < 1 || launch.block > 1024)
          return Error(lf + ".block", absl::StrCat("is ", launch.block, "; expected 1 to 1024"));
        if (!launch.impl.empty() && launch.impl != "llmc")
          return Error(lf + ".impl", absl::StrCat("is '", launch.impl, "'; expected \"\" or llmc"));
        if (launch.impl == "llmc" && k.gemm.n == 0)
          return Error(lf + ".impl", "is llmc, but the kernel has no gemm to replace it");
        // A tile's partials: 256 x 256 floats at most (the runner sizes the
        // scratch by them).
        if (launch.split_floats < 0 || launch.split_floats > 65536)
          return Error(lf + ".split_floats",
                       absl::StrCat("is ", launch.split_floats, "; expected 0 to 65536"));
      }
      if (absl::Status st = CudaGemm(k.gemm, f + ".gemm", f); !st.ok()) return st;
      if (k.split_keys < 0)
        return Error(f + ".split_keys", absl::StrCat("must be >= 0, got ", k.split_keys));
      if (k.split_keys > 0) {
        // The runner sizes the attention scratch by them.
        for (auto [key, v] : {std::pair{"heads", k.heads}, std::pair{"head_dim", k.head_dim}})
          if (v <= 0 || v > (int64_t{1} << 20))
            return Error(f + "." + key, absl::StrCat("is ", v, "; an attention kernel (split_keys ",
                                                     k.split_keys, ") needs a positive value"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Rest() {
    if (has_host_) {
      if (m_.host_library.empty())
        return Error("host_library", "is empty, but targets include host");
    }
    if (!m_.host_library.empty()) {
      if (std::string why = RelativePathProblem(m_.host_library); !why.empty())
        return Error("host_library", why);
    }
    if (!m_.tokenizer.empty()) {
      if (std::string why = RelativePathProblem(m_.tokenizer); !why.empty())
        return Error("tokenizer", why);
    }
    for (auto [field, id] : {std::pair{"bos_id", m_.bos_id}, std::pair{"eos_id", m_.eos_id}}) {
      if (id < -1 || id >= m_.model.vocab_size)
        return Error(field,
                     absl::StrCat(id, " is out of range: -1 (none) or a token id below vocab_size ",
                                  m_.model.vocab_size));
    }
    return absl::OkStatus();
  }

  const Manifest& m_;
  const std::string& path_;
  bool has_host_ = false;
};

}  // namespace

namespace artifact_internal {

bool CheckTensorLayout(const ManifestTensor& t, std::string* field, std::string* why) {
  auto fail = [&](const char* f, std::string w) {
    *field = f;
    *why = std::move(w);
    return false;
  };
  auto info = LookupWeightFormat(t.format);
  if (!info) return fail("format", absl::StrCat("'", t.format, "' is not a weight format"));
  if (t.shape.empty()) return fail("shape", "is empty");
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t elements = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] <= 0)
      return fail("shape", absl::StrCat("dimension ", d, " is ", t.shape[d],
                                        "; dimensions must be positive"));
    if (t.shape[d] > kMaxElements / elements) return fail("shape", "has more than 2^48 elements");
    elements *= t.shape[d];
  }
  if (info->grouped) {
    if (t.group <= 0 || t.group % 2 != 0)
      return fail("group", absl::StrCat("is ", t.group, "; format ", t.format,
                                        " needs a positive even quantization group (32, 64, 128)"));
  } else if (t.group != 0) {
    return fail("group", absl::StrCat("is ", t.group, "; it must be 0 for format ", t.format));
  }
  int64_t block = info->grouped ? t.group : info->block_elems;
  if (t.shape.back() % block != 0)
    return fail("shape",
                absl::StrCat("innermost dimension ", t.shape.back(), " is not a multiple of ",
                             block, " (the block of ", t.format, ")"));
  int64_t expected = WeightByteSize(t.format, elements, t.group);
  if (expected < 0 || static_cast<uint64_t>(expected) != t.bytes)
    return fail("bytes", absl::StrCat("is ", t.bytes, " but ", elements, " elements of ", t.format,
                                      info->grouped ? absl::StrCat(" (group ", t.group, ")") : "",
                                      " take ", expected));
  return true;
}

}  // namespace artifact_internal

absl::Status ValidateManifest(const Manifest& manifest, const std::string& path) {
  return Validator(manifest, path).Run();
}

}  // namespace llmc
