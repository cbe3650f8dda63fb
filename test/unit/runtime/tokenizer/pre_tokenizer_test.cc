// The hand-written pre-tokenizer splitters on inputs where the regexes are
// easy to get wrong: whitespace runs before words, newlines, contractions,
// digit grouping, symbols and non-ASCII classes.
#include "llmc/runtime/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc {
namespace {

using Words = std::vector<std::string>;

Words Split(PreTokenizer p, const std::string& text) { return PreTokenize(p, text); }

TEST(PreTokenizerGpt2, WordsTakeOneLeadingSpace) {
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "  hello"), (Words{" ", " hello"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "hello   "), (Words{"hello", "   "}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "a   b"), (Words{"a", "  ", " b"}));
}

TEST(PreTokenizerGpt2, WhitespaceOtherThanSpaceStandsAlone) {
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "\t\tfoo"), (Words{"\t", "\t", "foo"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, " \n x"), (Words{" \n", " x"}));
}

TEST(PreTokenizerGpt2, ContractionsAreCaseSensitive) {
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "it's we'll"), (Words{"it", "'s", " we", "'ll"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "IT'S"), (Words{"IT", "'", "S"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "'"), (Words{"'"}));
}

TEST(PreTokenizerGpt2, DigitsLettersAndSymbolsSeparate) {
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "abc123!!x"), (Words{"abc", "123", "!!", "x"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, " !!! 42"), (Words{" !!!", " 42"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"),  // 😀😀
            (Words{"\xF0\x9F\x98\x80\xF0\x9F\x98\x80"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "caf\xC3\xA9 \xE4\xB8\x96\xE7\x95\x8C"),  // café 世界
            (Words{"caf\xC3\xA9", " \xE4\xB8\x96\xE7\x95\x8C"}));
}

TEST(PreTokenizerDigitsThenGpt2, EveryDigitStandsAlone) {
  EXPECT_EQ(Split(PreTokenizer::kDigitsThenGpt2, "123456"), (Words{"1", "2", "3", "4", "5", "6"}));
  // The space before a digit can no longer join it.
  EXPECT_EQ(Split(PreTokenizer::kDigitsThenGpt2, "x 42y"), (Words{"x", " ", "4", "2", "y"}));
  // Non-ASCII digits too (Arabic-Indic ٣, superscript ²).
  EXPECT_EQ(Split(PreTokenizer::kDigitsThenGpt2, "\xD9\xA3\xC2\xB2"),
            (Words{"\xD9\xA3", "\xC2\xB2"}));
}

TEST(PreTokenizerLlama3, LetterRunsTakeOneNonLetterPrefix) {
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "\tfoo"), (Words{"\tfoo"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "(foo)"), (Words{"(foo", ")"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "\nfoo"), (Words{"\n", "foo"}));
}

TEST(PreTokenizerLlama3, ContractionsIgnoreCase) {
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "IT'S"), (Words{"IT", "'S"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "they'RE"), (Words{"they", "'RE"}));
}

TEST(PreTokenizerLlama3, DigitsGroupInThrees) {
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "$100"), (Words{"$", "100"}));
}

TEST(PreTokenizerLlama3, NewlinesEndWhitespaceAndSymbolRuns) {
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "a\n\n  b"), (Words{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "hello!!\n\nworld"), (Words{"hello", "!!\n\n", "world"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "  \n"), (Words{"  \n"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "x \r\n y"), (Words{"x", " \r\n", " y"}));
}

TEST(PreTokenizerQwen2, DigitsStandAlone) {
  EXPECT_EQ(Split(PreTokenizer::kQwen2, "1234 abc"), (Words{"1", "2", "3", "4", " abc"}));
}

TEST(PreTokenizerDefault, PunctuationThenGpt2ThenDigitTriples) {
  EXPECT_EQ(Split(PreTokenizer::kDefault, "Hello, world! 12345"),
            (Words{"Hello", ",", " world", "!", " ", "123", "45"}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  // A stray continuation byte and a truncated sequence: one U+FFFD each.
  EXPECT_EQ(Split(PreTokenizer::kGpt2,
                  "a\x80"
                  "b"),
            (Words{"a", "\xEF\xBF\xBD", "b"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2, "\xE2\x82"), (Words{"\xEF\xBF\xBD\xEF\xBF\xBD"}));
}

TEST(PreTokenizer, EmptyTextHasNoWords) {
  for (PreTokenizer p : {PreTokenizer::kDefault, PreTokenizer::kGpt2, PreTokenizer::kDigitsThenGpt2,
                         PreTokenizer::kLlama3, PreTokenizer::kQwen2})
    EXPECT_TRUE(Split(p, "").empty()) << ToString(p);
}

TEST(PreTokenizer, UnicodeWhitespaceCountsAsWhitespace) {
  // U+3000 IDEOGRAPHIC SPACE and U+00A0 NO-BREAK SPACE are \s; U+200B is not.
  EXPECT_EQ(Split(PreTokenizer::kGpt2,
                  "a\xE3\x80\x80\xE3\x80\x80"
                  "b"),
            (Words{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(Split(PreTokenizer::kGpt2,
                  "a\xE2\x80\x8B"
                  "b"),
            (Words{"a", "\xE2\x80\x8B", "b"}));
}

}  // namespace
}  // namespace llmc
