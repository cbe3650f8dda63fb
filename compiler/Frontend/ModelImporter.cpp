//===- ModelImporter.cpp - open a model folder or GGUF file ---------------===//
#include "ModelImporter.h"

#include "GGUFWeightNames.h"
#include "HFWeightNames.h"

#include "llmc/core/format/gguf.h"
#include "llmc/core/format/gguf_config.h"
#include "llmc/core/format/gguf_writer.h"
#include "llmc/core/format/hf_config.h"
#include "llmc/core/format/safetensors.h"
#include "llmc/core/weight_format.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <sys/stat.h>

namespace llmc {
namespace {

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  return "[" + absl::StrJoin(shape.begin(), shape.end(), ", ") + "]";
}

// The RMS norms' weights (Gemma's checkpoints store them minus 1).
bool isNormRole(WeightRole role) {
  switch (role) {
  case WeightRole::kAttnNorm:
  case WeightRole::kMlpNorm:
  case WeightRole::kPostAttnNorm:
  case WeightRole::kPostMlpNorm:
  case WeightRole::kFinalNorm:
  case WeightRole::kQueryNorm:
  case WeightRole::kKeyNorm:
    return true;
  default:
    return false;
  }
}

// Weights kept in a float format: vectors, and the MoE router.
bool isFloatRole(WeightRole role) {
  if (isNormRole(role))
    return true;
  switch (role) {
  case WeightRole::kQueryBias:
  case WeightRole::kKeyBias:
  case WeightRole::kValueBias:
  case WeightRole::kRouter: // llama.cpp keeps it f32; the routing reads it as floats
  case WeightRole::kRopeFreqFactors:
    return true;
  default:
    return false;
  }
}

//===----------------------------------------------------------------------===//
// GGUF
//===----------------------------------------------------------------------===//

class GGUFModel : public ImportedModel, public WeightCatalog {
public:
  static absl::StatusOr<std::unique_ptr<ImportedModel>> open(const std::string &path) {
    auto file = GgufFile::Open(path);
    if (!file.ok())
      return file.status();
    auto config = ModelConfigFromGguf(**file);
    if (!config.ok())
      return config.status();
    auto model = std::unique_ptr<GGUFModel>(new GGUFModel());
    model->path_ = path;
    model->config_ = *config;
    model->file = std::move(*file);
    return std::unique_ptr<ImportedModel>(std::move(model));
  }

  ModelSourceKind kind() const override { return ModelSourceKind::kGGUF; }
  const WeightCatalog &catalog() const override { return *this; }

  absl::StatusOr<std::optional<WeightEntry>>
  find(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const override {
    std::string name = ggufWeightName(role, layer);
    if (std::optional<FusedRows> rows = fusedRows(role, config_);
        rows && shape.size() == 2 && storesFused(*rows, layer, shape[1])) {
      const int64_t fusedShape[] = {rows->total, shape[1]};
      absl::StatusOr<std::optional<WeightEntry>> fused =
          findTensor(role, ggufFusedName(rows->kind, layer), fusedShape);
      if (!fused.ok() || !*fused)
        return fused;
      return std::optional<WeightEntry>(sliceOfFused(**fused, *rows));
    }
    return findTensor(role, name, shape);
  }

  std::string describe(WeightRole role, int layer) const override {
    return "tensor '" + ggufWeightName(role, layer) + "' in " + path_;
  }

  std::optional<RawTensor> rawTensor(const std::string &name) const override {
    const GgufTensorInfo *info = file->FindTensor(name);
    if (!info)
      return std::nullopt;
    return RawTensor{file->TensorData(*info), info->byte_size};
  }

  absl::StatusOr<std::string> exportTokenizer(const std::string &dir) const override {
    std::vector<std::pair<std::string, GgufValue>> keys;
    for (const auto &[key, value] : file->metadata())
      if (llvm::StringRef(key).starts_with("tokenizer.") || key == "general.architecture")
        keys.emplace_back(key, value);
    if (keys.size() <= 1)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the file has no tokenizer (no tokenizer.* keys)", path_));
    absl::Status st = WriteGgufMetadata(dir + "/tokenizer.gguf", keys);
    if (!st.ok())
      return st;
    return std::string("tokenizer.gguf");
  }

private:
  GGUFModel() = default;

  // Whether the file keeps this layer's projections of `rows.kind` fused:
  // there is no separate Q (gate), and attn_qkv (an ffn_up as tall as gate
  // and up together) is there.
  bool storesFused(const FusedRows &rows, int layer, int64_t columns) const {
    const WeightRole first = rows.kind == FusedKind::kQKV ? WeightRole::kQuery : WeightRole::kGate;
    if (file->FindTensor(ggufWeightName(first, layer)))
      return false;
    const GgufTensorInfo *fused = file->FindTensor(ggufFusedName(rows.kind, layer));
    if (!fused)
      return false;
    if (rows.kind == FusedKind::kQKV)
      return true; // its shape is checked against the config's
    return fused->ne.size() == 2 && fused->ne[0] == columns && fused->ne[1] == rows.total;
  }

  absl::StatusOr<std::optional<WeightEntry>>
  findTensor(WeightRole role, const std::string &name, llvm::ArrayRef<int64_t> shape) const {
    const GgufTensorInfo *info = file->FindTensor(name);
    if (!info)
      return std::nullopt;
    // GGML lists dimensions innermost first.
    std::vector<int64_t> logical(info->ne.rbegin(), info->ne.rend());
    // Stacked experts [experts, rows, columns] are their rows one after
    // another: the [experts * rows, columns] weight the IR takes.
    if (isExpertsRole(role) && logical.size() == 3)
      logical = {logical[0] * logical[1], logical[2]};
    if (llvm::ArrayRef<int64_t>(logical) != shape)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s but the model config implies %s for the %s", path_, name,
          shapeString(logical), shapeString(shape), toString(role)));
    std::optional<WeightFormatInfo> format = LookupGgmlType(info->ggml_type);
    std::optional<llm::WeightFormat> mapped =
        format ? llm::symbolizeWeightFormat(format->name) : std::nullopt;
    if (!mapped)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has GGML type %d, which llmc does not support", path_, name,
          info->ggml_type));
    if (isFloatRole(role) && *mapped != llm::WeightFormat::f32 &&
        *mapped != llm::WeightFormat::f16 && *mapped != llm::WeightFormat::bf16)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' (%s) is stored as %s; norms, biases and routers must be f32, f16 "
          "or bf16",
          path_, name, toString(role), format->name));
    return WeightEntry{name, *mapped};
  }

  std::unique_ptr<GgufFile> file;
};

//===----------------------------------------------------------------------===//
// Hugging Face folder
//===----------------------------------------------------------------------===//

class HFModel : public ImportedModel, public WeightCatalog {
public:
  static absl::StatusOr<std::unique_ptr<ImportedModel>> open(const std::string &folder) {
    auto config = LoadHFConfig(folder);
    if (!config.ok())
      return config.status();
    auto tensors = SafetensorsModel::Open(folder);
    if (!tensors.ok())
      return tensors.status();
    auto model = std::unique_ptr<HFModel>(new HFModel());
    model->path_ = folder;
    model->config_ = *config;
    model->tensors = std::move(*tensors);
    return std::unique_ptr<ImportedModel>(std::move(model));
  }

  ModelSourceKind kind() const override { return ModelSourceKind::kHuggingFace; }
  const WeightCatalog &catalog() const override { return *this; }

  absl::StatusOr<std::optional<WeightEntry>>
  find(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const override {
    if (isExpertsRole(role))
      return findExperts(role, layer, shape);
    std::string name = hfWeightName(role, layer, config_.architecture);
    // Phi-3 keeps Q/K/V and gate/up fused; a checkpoint that has the
    // separate tensor is read as stored.
    if (std::optional<FusedRows> rows = fusedRows(role, config_);
        rows && shape.size() == 2 && !tensors->Find(name)) {
      const int64_t fusedShape[] = {rows->total, shape[1]};
      absl::StatusOr<std::optional<WeightEntry>> fused =
          findTensor(role, hfFusedName(rows->kind, layer), fusedShape);
      if (!fused.ok() || !*fused)
        return fused;
      return std::optional<WeightEntry>(sliceOfFused(**fused, *rows));
    }
    absl::StatusOr<std::optional<WeightEntry>> found = findTensor(role, name, shape);
    // Gemma's RMS norms multiply by (1 + w) and its checkpoints store w; the
    // IR's norm multiplies by its weight, so the artifact gets w + 1 (as
    // llama.cpp's converter writes it into a GGUF).
    if (found.ok() && *found && isNormRole(role) &&
        llvm::StringRef(config_.architecture).starts_with("gemma"))
      (*found)->offset = 1.0;
    return found;
  }

  std::string describe(WeightRole role, int layer) const override {
    if (isExpertsRole(role))
      return "tensors '" + hfExpertName(role, layer, 0, config_.architecture) +
             "' and on, one per expert, in the safetensors of " + path_;
    return "tensor '" + hfWeightName(role, layer, config_.architecture) +
           "' in the safetensors of " + path_;
  }

  std::optional<RawTensor> rawTensor(const std::string &name) const override {
    const SafetensorsTensor *t = tensors->Find(name);
    if (!t)
      return std::nullopt;
    return RawTensor{t->data, t->byte_size};
  }

  absl::StatusOr<std::string> exportTokenizer(const std::string &dir) const override {
    for (const char *name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
      llvm::SmallString<256> from(path_);
      llvm::sys::path::append(from, name);
      if (!llvm::sys::fs::exists(from)) {
        if (llvm::StringRef(name) == "tokenizer.json")
          return absl::NotFoundError(absl::StrFormat(
              "%s: no tokenizer.json; llmc needs the tokenizer next to the weights", path_));
        continue;
      }
      if (std::error_code ec = llvm::sys::fs::copy_file(from, dir + "/" + name))
        return absl::InternalError(
            absl::StrFormat("cannot copy %s into the artifact: %s", from.str(), ec.message()));
    }
    return std::string("tokenizer.json");
  }

private:
  HFModel() = default;

  // A checkpoint stores each expert on its own: the stack is a concat of
  // their rows (the weight store joins them when the artifact is packed).
  absl::StatusOr<std::optional<WeightEntry>>
  findExperts(WeightRole role, int layer, llvm::ArrayRef<int64_t> shape) const {
    const int64_t experts = config_.num_experts;
    if (experts < 1 || shape.size() != 2 || shape[0] % experts != 0)
      return absl::InternalError("experts requested of a model without them");
    const int64_t one[] = {shape[0] / experts, shape[1]};
    WeightEntry stack{hfWeightName(role, layer, config_.architecture), llm::WeightFormat::f32};
    for (int e = 0; e < experts; ++e) {
      std::string name = hfExpertName(role, layer, e, config_.architecture);
      absl::StatusOr<std::optional<WeightEntry>> part = findTensor(role, name, one);
      if (!part.ok())
        return part.status();
      if (!*part) {
        if (e == 0)
          return std::nullopt;  // reported as the experts missing
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' is missing: the %s has %d experts", path_, name, toString(role),
            experts));
      }
      if (e > 0 && (*part)->format != stack.format)
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: tensor '%s' is stored as %s, expert 0 as %s; the experts of one projection "
            "must share a dtype",
            path_, name, llm::stringifyWeightFormat((*part)->format).str(),
            llm::stringifyWeightFormat(stack.format).str()));
      stack.format = (*part)->format;
      stack.parts.push_back(name);
    }
    return std::optional<WeightEntry>(std::move(stack));
  }

  absl::StatusOr<std::optional<WeightEntry>>
  findTensor(WeightRole role, const std::string &name, llvm::ArrayRef<int64_t> shape) const {
    const SafetensorsTensor *t = tensors->Find(name);
    if (!t)
      return std::nullopt;
    if (llvm::ArrayRef<int64_t>(t->shape) != shape)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has shape %s but config.json implies %s for the %s", t->file, name,
          shapeString(t->shape), shapeString(shape), toString(role)));
    std::optional<llm::WeightFormat> format;
    if (t->dtype == "F32")
      format = llm::WeightFormat::f32;
    else if (t->dtype == "F16")
      format = llm::WeightFormat::f16;
    else if (t->dtype == "BF16")
      format = llm::WeightFormat::bf16;
    if (!format)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: tensor '%s' has dtype %s; llmc imports F32, F16 and BF16 weights (quantize them "
          "with --quantize instead of bringing pre-quantized safetensors)",
          t->file, name, t->dtype));
    return WeightEntry{name, *format};
  }

  std::unique_ptr<SafetensorsModel> tensors;
};

} // namespace

absl::StatusOr<std::unique_ptr<ImportedModel>> importModel(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrFormat("%s: no such file or folder", path));
  if (S_ISDIR(st.st_mode))
    return HFModel::open(path);
  if (llvm::StringRef(path).ends_with_insensitive(".gguf"))
    return GGUFModel::open(path);
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: not a model; expected a Hugging Face folder (config.json + *.safetensors) or a .gguf "
      "file",
      path));
}

} // namespace llmc
