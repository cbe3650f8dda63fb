// The loaded vocabulary both tokenizer algorithms read: token texts, scores,
// per-token attributes, merges, special ids and the model's flags. Loaders
// (gguf_vocab.cc, hf_vocab.cc) fill the raw fields; FinalizeVocab derives the
// lookup tables. Field meanings follow llama.cpp's llama_vocab so that the
// same file gives the same ids.
//
// Internal to runtime/src/tokenizer.
#ifndef LLMC_RUNTIME_SRC_TOKENIZER_VOCAB_H_
#define LLMC_RUNTIME_SRC_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "llmc/runtime/tokenizer/pre_tokenizer.h"

namespace llmc::tokenizer_internal {

// Token attributes (llama.cpp's llama_token_attr bits).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1 << 0,
  kAttrUnused = 1 << 1,
  kAttrNormal = 1 << 2,
  kAttrControl = 1 << 3,      // special: split out only with parse_special
  kAttrUserDefined = 1 << 4,  // added token: always split out
  kAttrByte = 1 << 5,         // <0xXX> byte-fallback token
  kAttrLstrip = 1 << 7,       // eats whitespace on its left when split out
  kAttrRstrip = 1 << 8,       // ... and on its right
};

// GGUF's tokenizer.ggml.token_type values.
enum class GgufTokenType : int64_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};
uint32_t AttrFromGgufTokenType(int64_t type);

// Hash for string-keyed maps that can be probed with a string_view without
// building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// The key of merge (left, right) in Vocab::merge_ranks: left's length, then
// both texts, so that no choice of separator can make two merges collide.
std::string MergeKey(std::string_view left, std::string_view right);

enum class VocabModel {
  kBpe,  // byte-level BPE with merge ranks (GGUF "gpt2")
  kSpm,  // SentencePiece-style: score-ranked bigrams, ▁ for spaces, byte fallback (GGUF "llama")
};

struct Vocab {
  VocabModel model = VocabModel::kBpe;
  PreTokenizer pre = PreTokenizer::kDefault;  // kBpe only
  std::string pre_name;                       // as named in the file
  std::string source;                         // file name, for messages

  std::vector<std::string> tokens;
  std::vector<float> scores;    // kSpm merge priority (higher first)
  std::vector<uint32_t> attrs;  // TokenAttr bits
  // kBpe merges: MergeKey(left, right) -> rank, lower merges first.
  StringMap<int32_t> merge_ranks;

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // kSpm: a ▁ before the text and after each special token
  bool ignore_merges = false;     // kBpe: a word that is a token is taken whole (Llama 3)
  bool clean_spaces = false;      // Decode drops the space before . , ! ? and some contractions
  std::string chat_template;

  // Derived by FinalizeVocab.
  StringMap<int32_t> token_to_id;
  std::vector<int32_t> special_tokens;  // split out before tokenizing; longest first
  std::unordered_set<int32_t> eog_ids;  // end-of-generation tokens
  std::vector<std::string> pieces;      // text each token decodes to, specials rendered

  int64_t size() const { return int64_t(tokens.size()); }
  bool Has(int32_t id, uint32_t attr) const { return id >= 0 && id < size() && (attrs[id] & attr); }
  // The id of the token whose text is exactly `text`, or -1.
  int32_t Find(std::string_view text) const;
  // The token for one raw byte: "<0xXX>" for kSpm (or the byte itself), its
  // byte-level character for kBpe. -1 if the vocabulary has none.
  int32_t ByteToken(uint8_t byte) const;
};

// Checks the raw fields (sizes agree, ids in range, no duplicate token) and
// builds the derived tables. Errors name `vocab->source`.
absl::Status FinalizeVocab(Vocab* vocab);

}  // namespace llmc::tokenizer_internal

#endif  // LLMC_RUNTIME_SRC_TOKENIZER_VOCAB_H_
