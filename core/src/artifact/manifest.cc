// manifest.json: serialization (ManifestToJson / ManifestFromJson). The
// checks a manifest must pass before the runtime trusts any index or offset
// in it are in manifest_validate.cc (ValidateManifest).
#include "llmc/core/artifact/manifest.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "../format/json_parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llmc/core/artifact/cuda_abi.h"
#include "manifest_internal.h"

namespace llmc {
namespace {

using format_internal::DescribeJson;
using format_internal::ParseJson;
using nlohmann::json;
// Output keeps the order fields are set in: format_version first.
using ojson = nlohmann::ordered_json;

// Nesting beyond this is never a manifest; capping it keeps every later walk
// over the tree (nlohmann's dump is recursive) shallow.
constexpr int kMaxJsonDepth = 32;

// The deepest [ / { nesting of `text`, outside strings; stops counting at
// `cap + 1`.
int JsonDepth(std::string_view text, int cap) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > cap) return deepest;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

using artifact_internal::Field;
using artifact_internal::Indexed;
using artifact_internal::ModelError;

// Reads the fields of one JSON object; every error names the manifest file
// and the dotted path of the field.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  absl::Status Error(const std::string& field, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", field, " ", why));
  }

  // The member `key` of `obj`, which must be present.
  absl::StatusOr<const json*> Member(const json& obj, const std::string& prefix,
                                     std::string_view key) const {
    auto it = obj.find(key);
    if (it == obj.end()) return Error(Field(prefix, key), "is missing");
    return &*it;
  }

  absl::Status Read(const json& obj, const std::string& prefix, std::string_view key,
                    std::string* out) const {
    auto v = Member(obj, prefix, key);
    if (!v.ok()) return v.status();
    return ReadValue(**v, Field(prefix, key), out);
  }
  template <typename T>
  absl::Status Read(const json& obj, const std::string& prefix, std::string_view key,
                    T* out) const {
    auto v = Member(obj, prefix, key);
    if (!v.ok()) return v.status();
    return ReadValue(**v, Field(prefix, key), out);
  }

  absl::Status ReadValue(const json& v, const std::string& field, std::string* out) const {
    if (!v.is_string()) return Error(field, "must be a string, got " + DescribeJson(v));
    *out = v.get_ref<const std::string&>();
    return absl::OkStatus();
  }
  absl::Status ReadValue(const json& v, const std::string& field, int64_t* out) const {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Error(field, "is too large, got " + DescribeJson(v));
      *out = static_cast<int64_t>(u);
      return absl::OkStatus();
    }
    if (!v.is_number_integer()) return Error(field, "must be an integer, got " + DescribeJson(v));
    *out = v.get<int64_t>();
    return absl::OkStatus();
  }
  absl::Status ReadValue(const json& v, const std::string& field, int* out) const {
    int64_t wide = 0;
    if (auto st = ReadValue(v, field, &wide); !st.ok()) return st;
    if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max())
      return Error(field, "is out of range, got " + DescribeJson(v));
    *out = static_cast<int>(wide);
    return absl::OkStatus();
  }
  absl::Status ReadValue(const json& v, const std::string& field, uint64_t* out) const {
    if (!v.is_number_unsigned())
      return Error(field, "must be a non-negative integer, got " + DescribeJson(v));
    *out = v.get<uint64_t>();
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status ReadValue(const json& v, const std::string& field, std::vector<T>* out) const {
    if (!v.is_array()) return Error(field, "must be an array, got " + DescribeJson(v));
    out->clear();
    out->reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      T item{};
      if (auto st = ReadValue(v[i], Indexed(field, i), &item); !st.ok()) return st;
      out->push_back(std::move(item));
    }
    return absl::OkStatus();
  }

  // The member `key`, which must be an array of objects; calls
  // parse(element, "<field>[i]", &out[i]) for each.
  template <typename T, typename Parse>
  absl::Status ReadObjects(const json& obj, const std::string& prefix, std::string_view key,
                           std::vector<T>* out, Parse parse) const {
    auto v = Member(obj, prefix, key);
    if (!v.ok()) return v.status();
    std::string field = Field(prefix, key);
    if (!(*v)->is_array()) return Error(field, "must be an array, got " + DescribeJson(**v));
    out->clear();
    out->reserve((*v)->size());
    for (size_t i = 0; i < (*v)->size(); ++i) {
      const json& item = (**v)[i];
      std::string item_field = Indexed(field, i);
      if (!item.is_object())
        return Error(item_field, "must be an object, got " + DescribeJson(item));
      T parsed{};
      if (auto st = parse(item, item_field, &parsed); !st.ok()) return st;
      out->push_back(std::move(parsed));
    }
    return absl::OkStatus();
  }

 private:
  const std::string& path_;
};

#define LLMC_READ(reader, obj, prefix, key, out) \
  if (auto st = (reader).Read((obj), (prefix), (key), (out)); !st.ok()) return st

// A cost form {"c": .., "T": .., "S": .., "K": .., "L": .., "P": ..}: absent
// members are 0; any other member is an error (a typo would read as 0).
absl::Status ReadCostForm(const Reader& r, const json& j, const std::string& f,
                          ManifestCostForm* out) {
  if (!j.is_object()) return r.Error(f, "must be an object, got " + DescribeJson(j));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    double* slot = key == "c"   ? &out->c
                   : key == "T" ? &out->t
                   : key == "S" ? &out->s
                   : key == "K" ? &out->k
                   : key == "L" ? &out->l
                   : key == "P" ? &out->p
                                : nullptr;
    if (!slot) return r.Error(Field(f, key), "is not a cost variable (c, T, S, K, L or P)");
    if (!it.value().is_number() || !std::isfinite(it.value().get<double>()) ||
        it.value().get<double>() < 0)
      return r.Error(Field(f, key), "must be a finite number >= 0, got " + DescribeJson(it.value()));
    *slot = it.value().get<double>();
  }
  return absl::OkStatus();
}

absl::Status ReadCost(const Reader& r, const json& j, const std::string& f, ManifestCudaCost* out) {
  if (!j.is_object()) return r.Error(f, "must be an object, got " + DescribeJson(j));
  struct {
    const char* key;
    ManifestCostForm* form;
  } forms[] = {{"bytes", &out->bytes},
               {"flops", &out->flops},
               {"tensor_flops", &out->tensor_flops},
               {"trips", &out->trips},
               {"peeled_trips", &out->peeled_trips}};
  for (auto& [key, form] : forms)
    if (j.contains(key))
      if (absl::Status st = ReadCostForm(r, j[key], Field(f, key), form); !st.ok()) return st;
  if (j.contains("tokens_per_pass")) LLMC_READ(r, j, f, "tokens_per_pass", &out->tokens_per_pass);
  if (j.contains("passes_of")) {
    std::string of;
    LLMC_READ(r, j, f, "passes_of", &of);
    if (of != "T" && of != "L") return r.Error(Field(f, "passes_of"), "must be T or L, got " + of);
    out->passes_of_logits = of == "L";
  }
  if (out->tokens_per_pass < 0) return r.Error(Field(f, "tokens_per_pass"), "must be >= 0");
  if (out->trips.p != 0 && out->tokens_per_pass == 0)
    return r.Error(Field(f, "trips.P"), "needs tokens_per_pass");
  if (out->peeled_trips.p != 0 && out->tokens_per_pass == 0)
    return r.Error(Field(f, "peeled_trips.P"), "needs tokens_per_pass");
  if (!out->peeled_trips.empty() && out->trips.empty())
    return r.Error(Field(f, "peeled_trips"), "needs trips (the peeled ones are a part of them)");
  return absl::OkStatus();
}

absl::Status ParseStep(const Reader& r, const json& s, const std::string& f, ManifestStep* out) {
  if (s.is_object() && s.contains("name")) LLMC_READ(r, s, f, "name", &out->name);
  LLMC_READ(r, s, f, "kernel", &out->kernel);
  LLMC_READ(r, s, f, "buffers", &out->buffers);
  LLMC_READ(r, s, f, "weights", &out->weights);
  LLMC_READ(r, s, f, "caches", &out->caches);
  // Optional: only the collectives of a tensor-parallel plan have it.
  if (s.contains("collective")) LLMC_READ(r, s, f, "collective", &out->collective);
  if (s.contains("in_row_elems")) LLMC_READ(r, s, f, "in_row_elems", &out->in_row_elems);
  if (s.contains("out_row_elems")) LLMC_READ(r, s, f, "out_row_elems", &out->out_row_elems);
  if (s.contains("peer")) LLMC_READ(r, s, f, "peer", &out->peer);
  return absl::OkStatus();
}

// The "mesh" object (ManifestMesh).
absl::Status ParseMesh(const Reader& r, const json& mj, ManifestMesh* out) {
  const std::string f = "mesh";
  if (!mj.is_object()) return r.Error(f, "must be an object, got " + DescribeJson(mj));
  LLMC_READ(r, mj, f, "tp", &out->tp);
  LLMC_READ(r, mj, f, "pp", &out->pp);
  LLMC_READ(r, mj, f, "kv_heads", &out->kv_heads);
  // Pipeline stages: only a manifest with pp > 1 has them.
  if (mj.contains("stage")) LLMC_READ(r, mj, f, "stage", &out->stage);
  if (mj.contains("stages")) {
    auto st = r.ReadObjects(mj, f, "stages", &out->stages,
                            [&](const json& k, const std::string& kf, ManifestStage* stage) {
                              LLMC_READ(r, k, kf, "manifest", &stage->manifest);
                              LLMC_READ(r, k, kf, "first_layer", &stage->first_layer);
                              LLMC_READ(r, k, kf, "num_layers", &stage->num_layers);
                              return absl::OkStatus();
                            });
    if (!st.ok()) return st;
  }
  return r.ReadObjects(mj, f, "ranks", &out->ranks,
                       [&](const json& k, const std::string& kf, ManifestMeshRank* rank) {
                         LLMC_READ(r, k, kf, "weights_file", &rank->weights_file);
                         LLMC_READ(r, k, kf, "weights_size", &rank->weights_size);
                         LLMC_READ(r, k, kf, "weights_checksum", &rank->weights_checksum);
                         return absl::OkStatus();
                       });
}

// The "cuda" object (ManifestCuda).
absl::Status ParseCuda(const Reader& r, const json& c, ManifestCuda* out) {
  const std::string f = "cuda";
  if (!c.is_object()) return r.Error(f, "must be an object, got " + DescribeJson(c));
  LLMC_READ(r, c, f, "activation_dtype", &out->activation_dtype);
  LLMC_READ(r, c, f, "cuda_abi_version", &out->cuda_abi_version);
  auto st = r.ReadObjects(c, f, "modules", &out->modules,
                          [&](const json& m, const std::string& mf, ManifestCudaModule* mod) {
                            LLMC_READ(r, m, mf, "arch", &mod->arch);
                            LLMC_READ(r, m, mf, "file", &mod->file);
                            LLMC_READ(r, m, mf, "checksum", &mod->checksum);
                            return r.ReadObjects(
                                m, mf, "ptxas", &mod->ptxas,
                                [&](const json& p, const std::string& pf, ManifestPtxasEntry* e) {
                                  LLMC_READ(r, p, pf, "symbol", &e->symbol);
                                  LLMC_READ(r, p, pf, "registers", &e->registers);
                                  LLMC_READ(r, p, pf, "spill_stores", &e->spill_stores);
                                  LLMC_READ(r, p, pf, "spill_loads", &e->spill_loads);
                                  LLMC_READ(r, p, pf, "shared_bytes", &e->shared_bytes);
                                  LLMC_READ(r, p, pf, "stack_bytes", &e->stack_bytes);
                                  return absl::OkStatus();
                                });
                          });
  if (!st.ok()) return st;
  st = r.ReadObjects(c, f, "kernels", &out->kernels,
                     [&](const json& k, const std::string& kf, ManifestCudaKernel* kernel) {
                       LLMC_READ(r, k, kf, "name", &kernel->name);
                       LLMC_READ(r, k, kf, "ops", &kernel->ops);
                       auto launches = r.ReadObjects(
                           k, kf, "launches", &kernel->launches,
                           [&](const json& l, const std::string& lf, ManifestCudaLaunch* launch) {
                             LLMC_READ(r, l, lf, "symbol", &launch->symbol);
                             LLMC_READ(r, l, lf, "when", &launch->when);
                             LLMC_READ(r, l, lf, "grid", &launch->grid);
                             LLMC_READ(r, l, lf, "block", &launch->block);
                             if (l.contains("impl")) LLMC_READ(r, l, lf, "impl", &launch->impl);
                             if (l.contains("variant"))
                               LLMC_READ(r, l, lf, "variant", &launch->variant);
                             if (l.contains("split_floats"))
                               LLMC_READ(r, l, lf, "split_floats", &launch->split_floats);
                             if (l.contains("cost")) {
                               absl::Status cs = ReadCost(r, l["cost"], lf + ".cost", &launch->cost);
                               if (!cs.ok()) return cs;
                             }
                             return absl::OkStatus();
                           });
                       if (!launches.ok()) return launches;
                       LLMC_READ(r, k, kf, "split_keys", &kernel->split_keys);
                       LLMC_READ(r, k, kf, "heads", &kernel->heads);
                       LLMC_READ(r, k, kf, "head_dim", &kernel->head_dim);
                       if (k.contains("operand_k")) {
                         LLMC_READ(r, k, kf, "operand_k", &kernel->gemm.operand_k);
                         LLMC_READ(r, k, kf, "operand_rows", &kernel->gemm.operand_rows);
                       }
                       if (k.contains("gemm")) {
                         const json& g = k["gemm"];
                         std::string gf = kf + ".gemm";
                         ManifestCudaGemm* gemm = &kernel->gemm;
                         LLMC_READ(r, g, gf, "n", &gemm->n);
                         LLMC_READ(r, g, gf, "k", &gemm->k);
                         LLMC_READ(r, g, gf, "columns", &gemm->columns);
                         LLMC_READ(r, g, gf, "weight", &gemm->weight);
                         LLMC_READ(r, g, gf, "rows", &gemm->rows);
                         LLMC_READ(r, g, gf, "pre", &gemm->pre);
                         LLMC_READ(r, g, gf, "epi", &gemm->epi);
                         if (g.contains("deq")) LLMC_READ(r, g, gf, "deq", &gemm->deq);
                       }
                       return absl::OkStatus();
                     });
  if (!st.ok()) return st;
  st = r.ReadObjects(c, f, "steps", &out->steps,
                     [&](const json& s, const std::string& sf, ManifestStep* step) {
                       return ParseStep(r, s, sf, step);
                     });
  if (!st.ok() || !c.contains("samplers")) return st;
  return r.ReadObjects(c, f, "samplers", &out->samplers,
                       [&](const json& s, const std::string& sf, ManifestCudaSampler* sampler) {
                         LLMC_READ(r, s, sf, "kind", &sampler->kind);
                         LLMC_READ(r, s, sf, "symbol", &sampler->symbol);
                         LLMC_READ(r, s, sf, "block", &sampler->block);
                         return absl::OkStatus();
                       });
}

absl::StatusOr<Manifest> ParseManifest(const json& j, const std::string& path) {
  Reader r(path);
  if (!j.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a JSON object, got ", DescribeJson(j)));
  Manifest m;
  // The version first: a manifest of another version may differ in any field.
  if (j.find("format_version") == j.end())
    return r.Error("format_version", "is missing: this is not an llmc manifest");
  LLMC_READ(r, j, "", "format_version", &m.format_version);
  if (m.format_version != kArtifactFormatVersion)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: format_version %d is not supported by this runtime (it reads version %d); "
        "recompile the model with this llmc",
        path, m.format_version, kArtifactFormatVersion));

  LLMC_READ(r, j, "", "host_abi_version", &m.host_abi_version);
  LLMC_READ(r, j, "", "compiler", &m.compiler);
  LLMC_READ(r, j, "", "source", &m.source);
  {
    auto model = r.Member(j, "", "model");
    if (!model.ok()) return model.status();
    if (!(*model)->is_object())
      return r.Error("model", "must be an object, got " + DescribeJson(**model));
    auto config = ModelConfigFromJson((*model)->dump());
    if (!config.ok()) return ModelError(path, config.status());
    m.model = *std::move(config);
  }
  LLMC_READ(r, j, "", "targets", &m.targets);
  LLMC_READ(r, j, "", "activation_dtype", &m.activation_dtype);
  LLMC_READ(r, j, "", "kv_dtype", &m.kv_dtype);

  {
    auto weights = r.Member(j, "", "weights");
    if (!weights.ok()) return weights.status();
    const json& w = **weights;
    if (!w.is_object()) return r.Error("weights", "must be an object, got " + DescribeJson(w));
    LLMC_READ(r, w, "weights", "file", &m.weights.file);
    LLMC_READ(r, w, "weights", "size", &m.weights.size);
    LLMC_READ(r, w, "weights", "checksum", &m.weights.checksum);
    if (w.contains("dummy_seed")) LLMC_READ(r, w, "weights", "dummy_seed", &m.weights.dummy_seed);
    auto st = r.ReadObjects(w, "weights", "tensors", &m.weights.tensors,
                            [&](const json& t, const std::string& f, ManifestTensor* out) {
                              LLMC_READ(r, t, f, "name", &out->name);
                              LLMC_READ(r, t, f, "format", &out->format);
                              LLMC_READ(r, t, f, "shape", &out->shape);
                              LLMC_READ(r, t, f, "group", &out->group);
                              LLMC_READ(r, t, f, "offset", &out->offset);
                              LLMC_READ(r, t, f, "bytes", &out->bytes);
                              return absl::OkStatus();
                            });
    if (!st.ok()) return st;
  }
  {
    auto st = r.ReadObjects(j, "", "buffers", &m.buffers,
                            [&](const json& b, const std::string& f, ManifestBuffer* out) {
                              LLMC_READ(r, b, f, "name", &out->name);
                              LLMC_READ(r, b, f, "rows", &out->rows);
                              LLMC_READ(r, b, f, "row_bytes", &out->row_bytes);
                              LLMC_READ(r, b, f, "dtype", &out->dtype);
                              LLMC_READ(r, b, f, "row_elems", &out->row_elems);
                              return absl::OkStatus();
                            });
    if (!st.ok()) return st;
  }
  {
    auto st = r.ReadObjects(j, "", "kernels", &m.kernels,
                            [&](const json& k, const std::string& f, ManifestKernel* out) {
                              LLMC_READ(r, k, f, "name", &out->name);
                              LLMC_READ(r, k, f, "target", &out->target);
                              LLMC_READ(r, k, f, "symbol", &out->symbol);
                              LLMC_READ(r, k, f, "ops", &out->ops);
                              LLMC_READ(r, k, f, "launch", &out->launch);
                              return absl::OkStatus();
                            });
    if (!st.ok()) return st;
  }
  {
    auto st = r.ReadObjects(j, "", "steps", &m.steps,
                            [&](const json& s, const std::string& f, ManifestStep* out) {
                              return ParseStep(r, s, f, out);
                            });
    if (!st.ok()) return st;
  }
  LLMC_READ(r, j, "", "logits_buffer", &m.logits_buffer);
  LLMC_READ(r, j, "", "host_library", &m.host_library);
  LLMC_READ(r, j, "", "tokenizer", &m.tokenizer);
  LLMC_READ(r, j, "", "bos_id", &m.bos_id);
  LLMC_READ(r, j, "", "eos_id", &m.eos_id);
  // Optional: written only by `llmc compile --target=sm_XX`.
  if (auto it = j.find("cuda"); it != j.end())
    if (auto st = ParseCuda(r, *it, &m.cuda); !st.ok()) return st;
  // Optional: written only for a partitioned artifact (tp * pp > 1).
  if (auto it = j.find("mesh"); it != j.end())
    if (auto st = ParseMesh(r, *it, &m.mesh); !st.ok()) return st;
  return m;
}

#undef LLMC_READ

}  // namespace

namespace {

ojson CostFormToJson(const ManifestCostForm& f) {
  ojson j = ojson::object();
  for (auto [key, v] : {std::pair<const char*, double>{"c", f.c}, {"T", f.t}, {"S", f.s},
                        {"K", f.k}, {"L", f.l}, {"P", f.p}})
    if (v != 0) j[key] = v;
  return j;
}

ojson CostToJson(const ManifestCudaCost& c) {
  ojson j = ojson::object();
  if (!c.bytes.empty()) j["bytes"] = CostFormToJson(c.bytes);
  if (!c.flops.empty()) j["flops"] = CostFormToJson(c.flops);
  if (!c.tensor_flops.empty()) j["tensor_flops"] = CostFormToJson(c.tensor_flops);
  if (!c.trips.empty()) j["trips"] = CostFormToJson(c.trips);
  if (!c.peeled_trips.empty()) j["peeled_trips"] = CostFormToJson(c.peeled_trips);
  if (c.tokens_per_pass != 0) j["tokens_per_pass"] = c.tokens_per_pass;
  if (c.passes_of_logits) j["passes_of"] = "L";
  return j;
}

ojson CudaToJson(const ManifestCuda& c, ojson steps) {
  ojson modules = ojson::array();
  for (const ManifestCudaModule& mod : c.modules) {
    ojson ptxas = ojson::array();
    for (const ManifestPtxasEntry& e : mod.ptxas)
      ptxas.push_back({{"symbol", e.symbol},
                       {"registers", e.registers},
                       {"spill_stores", e.spill_stores},
                       {"spill_loads", e.spill_loads},
                       {"shared_bytes", e.shared_bytes},
                       {"stack_bytes", e.stack_bytes}});
    modules.push_back({{"arch", mod.arch},
                       {"file", mod.file},
                       {"checksum", mod.checksum},
                       {"ptxas", std::move(ptxas)}});
  }
  ojson kernels = ojson::array();
  for (const ManifestCudaKernel& k : c.kernels) {
    ojson launches = ojson::array();
    for (const ManifestCudaLaunch& l : k.launches) {
      ojson launch = {{"symbol", l.symbol}, {"when", l.when}, {"grid", l.grid}, {"block", l.block}};
      if (!l.impl.empty()) launch["impl"] = l.impl;
      if (!l.variant.empty()) launch["variant"] = l.variant;
      if (l.split_floats > 0) launch["split_floats"] = l.split_floats;
      if (!l.cost.empty()) launch["cost"] = CostToJson(l.cost);
      launches.push_back(std::move(launch));
    }
    ojson kernel = {{"name", k.name},
                    {"ops", k.ops},
                    {"launches", std::move(launches)},
                    {"split_keys", k.split_keys},
                    {"heads", k.heads},
                    {"head_dim", k.head_dim}};
    if (k.gemm.n > 0)
      kernel["gemm"] = {
          {"n", k.gemm.n},           {"k", k.gemm.k},       {"columns", k.gemm.columns},
          {"weight", k.gemm.weight}, {"rows", k.gemm.rows}, {"pre", k.gemm.pre},
          {"epi", k.gemm.epi}};
    if (!k.gemm.deq.empty()) kernel["gemm"]["deq"] = k.gemm.deq;
    if (k.gemm.operand_k > 0) {
      kernel["operand_k"] = k.gemm.operand_k;
      kernel["operand_rows"] = k.gemm.operand_rows;
    }
    kernels.push_back(std::move(kernel));
  }
  ojson j = ojson::object();
  j["activation_dtype"] = c.activation_dtype;
  j["cuda_abi_version"] = c.cuda_abi_version;
  j["modules"] = std::move(modules);
  j["kernels"] = std::move(kernels);
  j["steps"] = std::move(steps);
  if (!c.samplers.empty()) {
    ojson samplers = ojson::array();
    for (const ManifestCudaSampler& s : c.samplers)
      samplers.push_back({{"kind", s.kind}, {"symbol", s.symbol}, {"block", s.block}});
    j["samplers"] = std::move(samplers);
  }
  return j;
}

ojson MeshToJson(const ManifestMesh& mesh) {
  ojson ranks = ojson::array();
  for (const ManifestMeshRank& rank : mesh.ranks)
    ranks.push_back({{"weights_file", rank.weights_file},
                     {"weights_size", rank.weights_size},
                     {"weights_checksum", rank.weights_checksum}});
  ojson j = ojson::object();
  j["tp"] = mesh.tp;
  j["pp"] = mesh.pp;
  j["kv_heads"] = mesh.kv_heads;
  if (mesh.pp > 1) {
    ojson stages = ojson::array();
    for (const ManifestStage& st : mesh.stages)
      stages.push_back({{"manifest", st.manifest},
                        {"first_layer", st.first_layer},
                        {"num_layers", st.num_layers}});
    j["stage"] = mesh.stage;
    j["stages"] = std::move(stages);
  }
  j["ranks"] = std::move(ranks);
  return j;
}

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  // Callers may be built without exceptions: none may leave (only bad_alloc
  // could; strings that are not UTF-8 are written with U+FFFD instead).
  try {
    ojson tensors = ojson::array();
    for (const ManifestTensor& t : m.weights.tensors)
      tensors.push_back({{"name", t.name},
                         {"format", t.format},
                         {"shape", t.shape},
                         {"group", t.group},
                         {"offset", t.offset},
                         {"bytes", t.bytes}});
    ojson buffers = ojson::array();
    for (const ManifestBuffer& b : m.buffers)
      buffers.push_back({{"name", b.name},
                         {"rows", b.rows},
                         {"row_bytes", b.row_bytes},
                         {"dtype", b.dtype},
                         {"row_elems", b.row_elems}});
    ojson kernels = ojson::array();
    for (const ManifestKernel& k : m.kernels)
      kernels.push_back({{"name", k.name},
                         {"target", k.target},
                         {"symbol", k.symbol},
                         {"ops", k.ops},
                         {"launch", k.launch}});
    auto step_list = [](const std::vector<ManifestStep>& list) {
      ojson out = ojson::array();
      for (const ManifestStep& s : list) {
        ojson step = {{"name", s.name},
                      {"kernel", s.kernel},
                      {"buffers", s.buffers},
                      {"weights", s.weights},
                      {"caches", s.caches}};
        // Kernel launches leave it out: unpartitioned manifests stay as they were.
        if (!s.collective.empty()) {
          step["collective"] = s.collective;
          step["in_row_elems"] = s.in_row_elems;
          step["out_row_elems"] = s.out_row_elems;
          if (s.peer >= 0) step["peer"] = s.peer;
        }
        out.push_back(std::move(step));
      }
      return out;
    };
    ojson steps = step_list(m.steps);
    // Our own output, so it parses; the config's JSON has one definition.
    ojson model = ojson::parse(ModelConfigToJson(m.model, -1), nullptr, /*allow_exceptions=*/false);
    ojson j = ojson::object();
    j["format_version"] = m.format_version;
    j["host_abi_version"] = m.host_abi_version;
    j["compiler"] = m.compiler;
    j["source"] = m.source;
    j["model"] = std::move(model);
    j["targets"] = m.targets;
    j["activation_dtype"] = m.activation_dtype;
    j["kv_dtype"] = m.kv_dtype;
    j["weights"] = {{"file", m.weights.file},
                    {"size", m.weights.size},
                    {"checksum", m.weights.checksum},
                    {"tensors", std::move(tensors)}};
    if (m.weights.dummy_seed != 0) j["weights"]["dummy_seed"] = m.weights.dummy_seed;
    j["buffers"] = std::move(buffers);
    j["kernels"] = std::move(kernels);
    j["steps"] = std::move(steps);
    j["logits_buffer"] = m.logits_buffer;
    j["host_library"] = m.host_library;
    j["tokenizer"] = m.tokenizer;
    j["bos_id"] = m.bos_id;
    j["eos_id"] = m.eos_id;
    // Only CUDA artifacts have the section (host-only manifests stay as they were).
    if (!m.cuda.modules.empty()) j["cuda"] = CudaToJson(m.cuda, step_list(m.cuda.steps));
    // Only partitioned artifacts have it (one-rank manifests stay as they were).
    if (m.mesh.tp > 1 || m.mesh.pp > 1) j["mesh"] = MeshToJson(m.mesh);
    // Invalid UTF-8 in a string is written as U+FFFD rather than thrown.
    return j.dump(2, ' ', /*ensure_ascii=*/false, ojson::error_handler_t::replace) + "\n";
  } catch (...) {
    return "{\"error\": \"ManifestToJson failed\"}\n";
  }
}

absl::StatusOr<Manifest> ManifestFromJson(const std::string& text, const std::string& path) {
  if (JsonDepth(text, kMaxJsonDepth) > kMaxJsonDepth)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": invalid JSON: nested deeper than ", kMaxJsonDepth, " levels"));
  try {
    std::string duplicate;
    auto parsed = ParseJson(text, path, &duplicate);
    if (!parsed.ok()) return parsed.status();
    if (!duplicate.empty())
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": field '", duplicate, "' occurs twice"));
    auto manifest = ParseManifest(*parsed, path);
    if (!manifest.ok()) return manifest.status();
    if (auto st = ValidateManifest(*manifest, path); !st.ok()) return st;
    return manifest;
  } catch (const std::exception& e) {  // nlohmann's, or bad_alloc: never past this library
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

}  // namespace llmc
