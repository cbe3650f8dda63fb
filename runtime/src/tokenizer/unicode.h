// Unicode helpers of the tokenizers: codepoint classes for the pre-tokenizer
// splitters, UTF-8 decoding that tolerates invalid input the way llama.cpp
// does, and the GPT-2 byte <-> codepoint mapping of byte-level BPE.
//
// Internal to runtime/src/tokenizer.
#ifndef LLMC_RUNTIME_SRC_TOKENIZER_UNICODE_H_
#define LLMC_RUNTIME_SRC_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tokenizer_internal {

// General-category classes, one per codepoint (the partition llama.cpp's
// pre-tokenizers see). Bit flags so that splitters can test sets cheaply.
enum CategoryClass : uint8_t {
  kUndefined = 1 << 0,    // Cn: unassigned
  kNumber = 1 << 1,       // \p{N}
  kLetter = 1 << 2,       // \p{L}
  kSeparator = 1 << 3,    // \p{Z}
  kMark = 1 << 4,         // \p{M}
  kPunctuation = 1 << 5,  // \p{P}
  kSymbol = 1 << 6,       // \p{S}
  kControl = 1 << 7,      // \p{C} other than Cn
};

struct CategoryRange {
  uint32_t first;
  CategoryClass category;
};

// What a splitter needs to know about one codepoint. A default-constructed
// value (category 0) stands for "no codepoint": a position past the end of
// the text being split, which matches no class.
struct CharClass {
  uint8_t category = 0;
  bool whitespace = false;  // PropList White_Space (\s)

  bool letter() const { return category & kLetter; }
  bool number() const { return category & kNumber; }
  bool punctuation() const { return category & kPunctuation; }
  bool present() const { return category != 0; }
};

CharClass Classify(uint32_t cp);

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Byte length of the UTF-8 sequence a lead byte announces (1 for stray
// continuation bytes), from its high nibble only, as llama.cpp computes it.
size_t Utf8SequenceLength(uint8_t lead);

// Decodes UTF-8 like llama.cpp's unicode_cpts_from_utf8: a byte that does not
// start a complete sequence becomes U+FFFD and decoding resumes at the next
// byte. Overlong forms and surrogates are accepted as they come; a sequence
// decoding above U+10FFFF is treated as invalid (llama.cpp would throw).
std::vector<uint32_t> DecodeUtf8(std::string_view text);

void AppendUtf8(uint32_t cp, std::string* out);

// GPT-2's reversible byte -> printable codepoint mapping of byte-level BPE
// (bytes that are printable Latin-1 map to themselves, the rest to U+0100..).
uint32_t ByteToCodepoint(uint8_t byte);
std::optional<uint8_t> CodepointToByte(uint32_t cp);

// The byte-level encoding of `text`: each byte replaced by the UTF-8 of its
// mapped codepoint.
std::string ByteLevelEncode(std::string_view text);

}  // namespace llmc::tokenizer_internal

#endif  // LLMC_RUNTIME_SRC_TOKENIZER_UNICODE_H_
