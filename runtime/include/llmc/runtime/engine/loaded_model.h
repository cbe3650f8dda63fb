// An artifact opened for execution: the artifact, its tokenizer, a step
// runner on the chosen backend and the end-of-generation token ids. What the
// Engine (and the Generator on it) starts from. Knows no launcher: the world
// of a partitioned artifact comes in options.runner.communicator, which the
// commands join (cli/rank_entry.h).
#ifndef LLMC_RUNTIME_ENGINE_LOADED_MODEL_H_
#define LLMC_RUNTIME_ENGINE_LOADED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llmc/runtime/artifact/artifact.h"
#include "llmc/runtime/exec/backend.h"
#include "llmc/runtime/exec/step_runner.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc {

struct LoadOptions {
  RunnerOptions runner;
  BackendChoice backend;  // ChooseBackend's answer; the default runs on the host
  bool verify_checksum = true;
};

struct LoadedModel {
  std::unique_ptr<Artifact> artifact;  // null for a model put together by a test
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<StepRunner> runner;
  std::vector<int32_t> eos_ids;  // the tokenizer's end-of-generation tokens
  int64_t max_position = 0;      // the model's context length
};

// Opens the artifact at `dir` (this rank's part of it, in a world) and
// creates this rank's runner (CreateRankRunner: rank 0 of a world leads the
// others' steps; a follower's runner is for RunFollowerRank).
absl::StatusOr<LoadedModel> LoadModel(const std::string& dir, const LoadOptions& options);

// The tokenizer's end-of-generation tokens, found once rather than per request.
std::vector<int32_t> EndOfGenerationIds(const Tokenizer& tokenizer);

}  // namespace llmc

#endif  // LLMC_RUNTIME_ENGINE_LOADED_MODEL_H_
