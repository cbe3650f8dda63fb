//===- ModelImporter.h - open a model folder or GGUF file -------*- C++ -*-===//
//
// The frontend's entry point: given a path, it recognises a Hugging Face
// folder (config.json + *.safetensors) or a .gguf file, reads the model
// config, and exposes the tensors as a WeightCatalog for the IR builder. The
// files are mmap'd and nothing is decoded: quantized GGUF tensors keep their
// block format, which becomes part of the weight's type in the IR.
//
//===----------------------------------------------------------------------===//
#ifndef LLMC_COMPILER_FRONTEND_MODELIMPORTER_H
#define LLMC_COMPILER_FRONTEND_MODELIMPORTER_H

#include "WeightCatalog.h"

#include "llmc/core/model_config.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>

namespace llmc {

enum class ModelSourceKind { kHuggingFace, kGGUF };

// An opened model. Owns the readers (and so the mappings) the catalog points
// into.
class ImportedModel {
public:
  virtual ~ImportedModel() = default;
  virtual ModelSourceKind kind() const = 0;
  const std::string &path() const { return path_; }
  const ModelConfig &config() const { return config_; }
  virtual const WeightCatalog &catalog() const = 0;

  // The stored bytes of a weight named in the catalog (mmap'd, in its file
  // format), or nullopt if there is none.
  struct RawTensor {
    const uint8_t *data;
    uint64_t size;
  };
  virtual std::optional<RawTensor> rawTensor(const std::string &name) const = 0;

  // Writes the model's tokenizer into `dir` and returns the path of the file
  // the runtime loads, relative to `dir`: tokenizer.json (+ its config) for
  // HF folders, a metadata-only tokenizer.gguf for GGUF files.
  virtual absl::StatusOr<std::string> exportTokenizer(const std::string &dir) const = 0;

protected:
  std::string path_;
  ModelConfig config_;
};

// Opens `path`: a folder with config.json and safetensors, or a .gguf file.
// Errors name the file and the field or tensor at fault.
absl::StatusOr<std::unique_ptr<ImportedModel>> importModel(const std::string &path);

} // namespace llmc

#endif // LLMC_COMPILER_FRONTEND_MODELIMPORTER_H
