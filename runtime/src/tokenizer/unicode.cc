#include "unicode.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace llmc::tokenizer_internal {
namespace {

#include "unicode_tables.inc"

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

CharClass LookUp(uint32_t cp) {
  CharClass c;
  auto it = std::upper_bound(std::begin(kCategoryRanges), std::end(kCategoryRanges), cp,
                             [](uint32_t v, const CategoryRange& r) { return v < r.first; });
  c.category = std::prev(it)->category;
  c.whitespace =
      std::binary_search(std::begin(kWhitespaceCodepoints), std::end(kWhitespaceCodepoints), cp);
  return c;
}

// Most text is ASCII; a direct table keeps the splitters off the binary search.
const std::array<CharClass, 128>& AsciiClasses() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t;
    for (uint32_t cp = 0; cp < 128; ++cp) t[cp] = LookUp(cp);
    return t;
  }();
  return table;
}

// Bytes GPT-2 keeps as themselves: printable ASCII and most of Latin-1.
bool IsSelfMappedByte(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMaps {
  std::array<uint32_t, 256> to_cp;
  std::array<std::string, 256> to_utf8;
};

const ByteMaps& GetByteMaps() {
  static const ByteMaps maps = [] {
    ByteMaps m;
    uint32_t next = 256;  // the other bytes take U+0100.. in byte order
    for (int b = 0; b < 256; ++b) {
      m.to_cp[b] = IsSelfMappedByte(b) ? uint32_t(b) : next++;
      AppendUtf8(m.to_cp[b], &m.to_utf8[b]);
    }
    return m;
  }();
  return maps;
}

}  // namespace

CharClass Classify(uint32_t cp) {
  if (cp < 128) return AsciiClasses()[cp];
  if (cp > kMaxCodepoint) return CharClass{kUndefined, false};
  return LookUp(cp);
}

size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

std::vector<uint32_t> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    uint32_t cp = kReplacementChar;
    size_t len = 1;
    if (b < 0x80) {
      cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      if (cont(i + 1)) cp = (uint32_t(b & 0x1F) << 6) | (s[i + 1] & 0x3F), len = 2;
    } else if ((b & 0xF0) == 0xE0) {
      if (cont(i + 1) && cont(i + 2))
        cp = (uint32_t(b & 0x0F) << 12) | (uint32_t(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F),
        len = 3;
    } else if ((b & 0xF8) == 0xF0) {
      if (cont(i + 1) && cont(i + 2) && cont(i + 3)) {
        uint32_t v = (uint32_t(b & 0x07) << 18) | (uint32_t(s[i + 1] & 0x3F) << 12) |
                     (uint32_t(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        if (v <= kMaxCodepoint) cp = v, len = 4;
      }
    }
    // Continuation bytes (10xxxxxx) and F8..FF leads stay U+FFFD of length 1.
    cps.push_back(cp);
    i += len;
  }
  return cps;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp <= 0x7F) {
    out->push_back(char(cp));
  } else if (cp <= 0x7FF) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp <= kMaxCodepoint) {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    AppendUtf8(kReplacementChar, out);
  }
}

uint32_t ByteToCodepoint(uint8_t byte) { return GetByteMaps().to_cp[byte]; }

std::optional<uint8_t> CodepointToByte(uint32_t cp) {
  if (cp < 256) {
    if (IsSelfMappedByte(int(cp))) return uint8_t(cp);
    return std::nullopt;
  }
  // U+0100.. are the remaining bytes, in increasing byte order.
  uint32_t index = cp - 256;
  for (int b = 0; b < 256; ++b) {
    if (IsSelfMappedByte(b)) continue;
    if (index-- == 0) return uint8_t(b);
  }
  return std::nullopt;
}

std::string ByteLevelEncode(std::string_view text) {
  const ByteMaps& maps = GetByteMaps();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += maps.to_utf8[uint8_t(c)];
  return out;
}

}  // namespace llmc::tokenizer_internal
