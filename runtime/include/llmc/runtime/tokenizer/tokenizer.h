// Tokenizers of the models llmc runs, giving the same token ids as
// llama.cpp for the same model file:
//   - byte-level BPE (GGUF tokenizer.ggml.model "gpt2"; Hugging Face BPE with
//     a ByteLevel pre-tokenizer), with llama.cpp's pre-tokenizer for the
//     file's `tokenizer.ggml.pre` (see pre_tokenizer.h);
//   - SentencePiece-style BPE (GGUF "llama"; Hugging Face BPE with
//     byte_fallback and a ▁ normalizer, as Llama 2 / TinyLlama ship).
//
// Encoding first cuts special tokens out of the text (only with
// parse_special for control tokens such as <|im_start|>; added tokens
// always), then runs the model's algorithm on the text between them.
//
// Loading reads GGUF metadata (tokenizer.ggml.*) or a tokenizer.json (plus
// tokenizer_config.json for BOS/EOS, add_bos_token and the chat template).
// Unsupported or malformed input is an error naming the file and the field.
#ifndef LLMC_RUNTIME_TOKENIZER_TOKENIZER_H_
#define LLMC_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace llmc {

class GgufFile;

namespace tokenizer_internal {
struct Vocab;
}

enum class TokenizerKind {
  kByteLevelBpe,
  kSentencePiece,
};

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  // `folder` holds tokenizer.json and optionally tokenizer_config.json (and
  // chat_template.jinja, which newer repositories keep apart).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHFFolder(const std::string& folder);
  // `name` is used in error messages. `config_json` is the optional
  // tokenizer_config.json text (empty: none).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJson(
      std::string_view json_text, const std::string& name, std::string_view config_json = {});
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // `add_bos`: add the special tokens the model wants around a prompt (BOS
  // when the model's add_bos_token is set, likewise EOS), llama.cpp's
  // add_special. `parse_special`: control-token text such as "<|im_start|>"
  // becomes that token instead of being tokenized as plain text.
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The text of `ids` as llama.cpp's llama_detokenize gives it: control
  // tokens render as their text only with `render_special`; a SentencePiece
  // model drops the leading space its encoder adds (from the first token that
  // renders text, so an unrendered BOS does not keep it); models whose
  // pre-tokenizer asks for it get llama.cpp's clean-up of spaces before
  // punctuation. Ids out of range render as "".
  std::string Decode(absl::Span<const int32_t> ids, bool render_special = false) const;

  // The text of one token, for streaming: no leading-space removal or
  // clean-up. Empty for an id out of range.
  std::string TokenToPiece(int32_t id, bool render_special) const;

  // The token whose text is exactly `text` (e.g. "<|im_end|>"), or -1.
  int32_t TokenId(std::string_view text) const;
  // The stored text of token `id` (byte-level or ▁-escaped), "" if out of range.
  const std::string& TokenText(int32_t id) const;

  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  bool add_bos() const;    // whether Encode(.., add_bos=true, ..) prepends BOS
  // True for tokens that end generation: EOS and the end-of-turn tokens
  // llama.cpp recognises by name (<|im_end|>, <|eot_id|>, ...).
  bool IsEndOfGeneration(int32_t id) const;
  int64_t vocab_size() const;
  TokenizerKind kind() const;
  // The pre-tokenizer name from the file (GGUF tokenizer.ggml.pre, or the one
  // recognised in tokenizer.json); "" for SentencePiece models.
  const std::string& pre_tokenizer() const;
  // The Jinja chat template shipped with the model, "" if none.
  const std::string& chat_template() const;

 private:
  explicit Tokenizer(std::unique_ptr<tokenizer_internal::Vocab> vocab);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      std::unique_ptr<tokenizer_internal::Vocab> vocab);
  std::unique_ptr<const tokenizer_internal::Vocab> vocab_;
};

}  // namespace llmc

#endif  // LLMC_RUNTIME_TOKENIZER_TOKENIZER_H_
