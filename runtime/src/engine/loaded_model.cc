#include "llmc/runtime/engine/loaded_model.h"

#include "llmc/core/format/gguf.h"
#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/rank_runner.h"

namespace llmc {
namespace {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const Artifact& artifact) {
  const std::string& rel = artifact.manifest().tokenizer;
  std::string path = artifact.Path(rel);
  if (rel.size() >= 5 && rel.substr(rel.size() - 5) == ".gguf") {
    LLMC_ASSIGN_OR_RETURN(auto gguf, GgufFile::Open(path));
    return Tokenizer::FromGguf(*gguf);
  }
  return Tokenizer::FromHFFolder(path.substr(0, path.rfind('/')));
}

}  // namespace

std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < int32_t(tokenizer.vocab_size()); ++t)
    if (tokenizer.IsEndOfGeneration(t)) ids.push_back(t);
  return ids;
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& dir, const LoadOptions& options) {
  LoadedModel m;
  Artifact::OpenOptions open;
  open.verify_checksum = options.verify_checksum;
  // One rank of a world maps only its rank's weights of a partitioned
  // artifact.
  open.rank = options.runner.communicator ? options.runner.communicator->rank() : 0;
  LLMC_ASSIGN_OR_RETURN(m.artifact, Artifact::Open(dir, open));
  LLMC_ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(*m.artifact));
  m.eos_ids = EndOfGenerationIds(*m.tokenizer);
  LLMC_ASSIGN_OR_RETURN(m.runner, CreateRankRunner(*m.artifact, options.runner, options.backend));
  m.max_position = m.artifact->manifest().model.max_position;
  return m;
}

}  // namespace llmc
