// Maps a GGUF file's metadata (llama.cpp's `<arch>.*` keys) to a ModelConfig.
#ifndef LLMC_CORE_FORMAT_GGUF_CONFIG_H_
#define LLMC_CORE_FORMAT_GGUF_CONFIG_H_

#include "absl/status/statusor.h"
#include "llmc/core/format/gguf.h"
#include "llmc/core/model_config.h"

namespace llmc {

// Supported `general.architecture` values: "llama" (also Mistral, SmolLM2 and
// TinyLlama GGUFs) and "qwen2". Keys read, with <arch> the architecture:
//   <arch>.block_count, .context_length, .embedding_length,
//   .feed_forward_length, .attention.head_count,
//   .attention.layer_norm_rms_epsilon                      required
//   .attention.head_count_kv (default head_count), .attention.key_length
//   (head_dim; default embedding_length / head_count), .rope.freq_base
//   (default 10000), .rope.scaling.type ("none" | "linear") and
//   .rope.scaling.factor, .attention.sliding_window (default 0),
//   .vocab_size (default: the length of tokenizer.ggml.tokens)
// Derived from the tensors: tie_word_embeddings (no `output.weight`),
// attention_bias (qwen2, or a `blk.0.attn_q.bias`). RoPE style: llama is
// interleaved (llama.cpp's converter permutes Q/K rows for GGML's normal
// rope), qwen2 is half-split (NEOX). Errors name the file and the key; the
// result passes ValidateModelConfig.
absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_GGUF_CONFIG_H_
