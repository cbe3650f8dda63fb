// libFuzzer target: Tokenizer::FromTokenizerJson on arbitrary bytes must
// return an error or a tokenizer, never crash, hang or leak; a tokenizer that
// loads must encode and decode a fixed text (specials, digits, non-ASCII,
// whitespace runs) with parse_special off and on.
//
// Seeds: test/fuzz/corpus/tokenizer_json/ (byte-level, Llama 3-style,
// SmolLM-style and SentencePiece-style tokenizer.json files).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "llmc/runtime/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tokenizer = llmc::Tokenizer::FromTokenizerJson(json, "fuzz/tokenizer.json");
  if (!tokenizer.ok()) return 0;
  static constexpr std::string_view kText =
      "Hello, world! <|im_start|>user\n12345 h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C "
      "\xF0\x9F\xA4\x97\t  it's\r\n\n"
      "<s></s><unk>\xFF end";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids = (*tokenizer)->Encode(kText, /*add_bos=*/true, special);
    (void)(*tokenizer)->Decode(ids, /*render_special=*/special);
  }
  return 0;
}
