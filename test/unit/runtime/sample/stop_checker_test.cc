#include "llmc/runtime/sample/stop_checker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc {
namespace {

using Pieces = std::vector<std::string>;

// True when `s` does not end inside a UTF-8 sequence.
bool EndsOnCharBoundary(const std::string& s) {
  size_t i = s.size();
  size_t continuation = 0;
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0) return continuation == 0;
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = 0;
  if (lead < 0x80)
    need = 0;
  else if ((lead & 0xE0) == 0xC0)
    need = 1;
  else if ((lead & 0xF0) == 0xE0)
    need = 2;
  else if ((lead & 0xF8) == 0xF0)
    need = 3;
  return continuation == need;
}

struct Outcome {
  std::string emitted;  // everything TakeReady() handed out, in order
  std::string text;
  FinishReason reason;
  std::string matched;
};

// Streams `pieces` through a text-only checker, taking the ready text after
// each; ends with Finish(kLength) when no stop string matched.
Outcome Run(const std::vector<std::string>& stops, const Pieces& pieces, bool check_utf8 = false) {
  StopChecker checker(stops);
  Outcome out;
  for (const std::string& piece : pieces) {
    const bool stopped = checker.AppendText(piece);
    const std::string ready(checker.TakeReady());
    out.emitted += ready;
    if (check_utf8) {
      EXPECT_TRUE(EndsOnCharBoundary(out.emitted)) << "emitted '" << out.emitted << "'";
    }
    if (stopped) break;
  }
  if (!checker.finished()) checker.Finish(FinishReason::kLength);
  out.emitted += std::string(checker.TakeReady());
  out.text = std::string(checker.text());
  out.reason = checker.finish_reason();
  out.matched = checker.matched_stop();
  return out;
}

// Whole, byte by byte, cut once anywhere, cut twice anywhere.
std::vector<Pieces> AllSplits(const std::string& text) {
  std::vector<Pieces> splits = {{text}};
  Pieces bytes;
  for (char c : text) bytes.emplace_back(1, c);
  splits.push_back(bytes);
  for (size_t i = 0; i <= text.size(); ++i) {
    splits.push_back({text.substr(0, i), text.substr(i)});
    for (size_t j = i; j <= text.size(); ++j)
      splits.push_back({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
  }
  return splits;
}

std::string Describe(const Pieces& pieces) {
  std::string s;
  for (const std::string& p : pieces) s += "[" + p + "]";
  return s;
}

// Every way of cutting `text` gives the same result, and the text handed out
// is exactly the final text: nothing had to be taken back.
void ExpectEverySplit(const std::vector<std::string>& stops, const std::string& text,
                      const std::string& expected_text, FinishReason expected_reason,
                      const std::string& expected_match, bool check_utf8 = false) {
  for (const Pieces& pieces : AllSplits(text)) {
    const Outcome out = Run(stops, pieces, check_utf8);
    ASSERT_EQ(out.text, expected_text) << Describe(pieces);
    ASSERT_EQ(out.emitted, expected_text) << Describe(pieces);
    ASSERT_EQ(out.reason, expected_reason) << Describe(pieces);
    ASSERT_EQ(out.matched, expected_match) << Describe(pieces);
  }
}

TEST(StopChecker, StopStringSpanningPiecesAtEveryBoundary) {
  ExpectEverySplit({"\nUser:"}, "The answer is 42.\nUser: hi", "The answer is 42.",
                   FinishReason::kStop, "\nUser:");
}

TEST(StopChecker, NoMatchReleasesEverythingAtEveryBoundary) {
  ExpectEverySplit({"\nUser:"}, "Use\nUse\nUser no colon\nUs", "Use\nUse\nUser no colon\nUs",
                   FinishReason::kLength, "");
}

TEST(StopChecker, HoldsBackAPossibleStartOfAStopString) {
  StopChecker checker({"world!"});
  EXPECT_FALSE(checker.AppendText("Hello wor"));
  EXPECT_EQ(checker.TakeReady(), "Hello ");
  EXPECT_EQ(checker.text(), "Hello wor");
  EXPECT_FALSE(checker.AppendText("ld"));
  EXPECT_EQ(checker.TakeReady(), "");
  EXPECT_FALSE(checker.AppendText("?"));  // "world?" is no stop: all of it goes
  EXPECT_EQ(checker.TakeReady(), "world?");
  EXPECT_FALSE(checker.AppendText(" wo"));
  EXPECT_EQ(checker.TakeReady(), " ");
  EXPECT_TRUE(checker.AppendText("rld!!"));
  EXPECT_EQ(checker.TakeReady(), "");
  EXPECT_EQ(checker.text(), "Hello world? ");
  EXPECT_EQ(checker.finish_reason(), FinishReason::kStop);
}

TEST(StopChecker, SelfOverlappingStopString) {
  StopChecker checker({"aab"});
  std::string emitted;
  for (char c : std::string("aaaa")) {
    EXPECT_FALSE(checker.AppendText(std::string(1, c)));
    emitted += checker.TakeReady();
  }
  EXPECT_EQ(emitted, "aa");              // "aa" may still start "aab"
  EXPECT_TRUE(checker.AppendText("b"));  // "aaaab": the stop starts at 2
  EXPECT_EQ(checker.TakeReady(), "");
  EXPECT_EQ(checker.text(), "aa");
  ExpectEverySplit({"aab"}, "aaaab", "aa", FinishReason::kStop, "aab");
}

TEST(StopChecker, OverlappingStopStringsFirstToCompleteWins) {
  // "abc" completes before "bcd", whatever the order of the list.
  ExpectEverySplit({"abc", "bcd"}, "xabcd", "x", FinishReason::kStop, "abc");
  ExpectEverySplit({"bcd", "abc"}, "xabcd", "x", FinishReason::kStop, "abc");
  // "bcd" completes before the longer "abcde" that starts earlier.
  ExpectEverySplit({"abcde", "bcd"}, "xabcdef", "xa", FinishReason::kStop, "bcd");
  // Same last byte: the one that starts first.
  ExpectEverySplit({"ab", "xab"}, "zxab", "z", FinishReason::kStop, "xab");
  ExpectEverySplit({"xab", "ab"}, "zxab", "z", FinishReason::kStop, "xab");
}

TEST(StopChecker, MultipleStopStringsFirstOccurrenceWins) {
  const std::string text = "alpha END beta ### gamma\n\n";
  ExpectEverySplit({"###", "END", "\n\n"}, text, "alpha ", FinishReason::kStop, "END");
  ExpectEverySplit({"###", "\n\n"}, text, "alpha END beta ", FinishReason::kStop, "###");
  ExpectEverySplit({"\n\n", "zzz"}, text, "alpha END beta ### gamma", FinishReason::kStop, "\n\n");
}

TEST(StopChecker, StopAtTheVeryStart) {
  ExpectEverySplit({"STOP"}, "STOP and more", "", FinishReason::kStop, "STOP");
}

TEST(StopChecker, Utf8PiecesNeverSplitACharacter) {
  // Pieces cut inside 3- and 4-byte characters, as byte-level BPE tokens do.
  ExpectEverySplit({"テキ"}, "日本語のテキストです", "日本語の", FinishReason::kStop, "テキ",
                   /*check_utf8=*/true);
  ExpectEverySplit({"🎉"}, "ok 😀 é done 🎉 end", "ok 😀 é done ", FinishReason::kStop, "🎉",
                   /*check_utf8=*/true);
  // A stop string sharing leading bytes with the text: 本 = E6 9C AC.
  ExpectEverySplit({"本当"}, "日本語で本", "日本語で本", FinishReason::kLength, "",
                   /*check_utf8=*/true);
}

TEST(StopChecker, IncompleteUtf8IsHeldUntilCompleteOrFinished) {
  StopChecker checker(std::vector<std::string>{});
  checker.AppendText("a\xE6\x97");  // 日 without its last byte
  EXPECT_EQ(checker.TakeReady(), "a");
  checker.AppendText("\xA5");
  EXPECT_EQ(checker.TakeReady(), "日");
  checker.AppendText("\xF0\x9F");  // half an emoji, then the sequence ends
  EXPECT_EQ(checker.TakeReady(), "");
  checker.Finish(FinishReason::kLength);
  EXPECT_EQ(checker.TakeReady(), "\xF0\x9F");
  EXPECT_EQ(checker.finish_reason(), FinishReason::kLength);
}

TEST(StopChecker, EmptyStopStringsAreIgnored) {
  StopChecker checker({"", "zz"});
  EXPECT_FALSE(checker.AppendText("abc"));
  EXPECT_EQ(checker.TakeReady(), "abc");
  EXPECT_FALSE(checker.finished());
}

TEST(StopChecker, EosEndsAndReleasesHeldText) {
  SamplingParams p;
  p.max_tokens = 10;
  p.stop = {"###"};
  StopChecker checker(p, {2, 32000});
  EXPECT_EQ(checker.AppendToken(5, "Hel"), FinishReason::kNone);
  EXPECT_EQ(checker.TakeReady(), "Hel");
  EXPECT_EQ(checker.AppendToken(6, "lo #"), FinishReason::kNone);
  EXPECT_EQ(checker.TakeReady(), "lo ");
  EXPECT_EQ(checker.AppendToken(32000, "</s>"), FinishReason::kEos);
  EXPECT_EQ(checker.TakeReady(), "#");
  EXPECT_EQ(checker.text(), "Hello #");  // the EOS token's text is not output
  EXPECT_EQ(checker.num_tokens(), 3);
  // Finished: later tokens change nothing.
  EXPECT_EQ(checker.AppendToken(7, "x"), FinishReason::kEos);
  EXPECT_EQ(checker.text(), "Hello #");
  EXPECT_EQ(checker.num_tokens(), 3);
  EXPECT_EQ(checker.matched_stop(), "");
}

TEST(StopChecker, IgnoreEosKeepsGoing) {
  SamplingParams p;
  p.ignore_eos = true;
  p.max_tokens = -1;
  StopChecker checker(p, {2});
  EXPECT_EQ(checker.AppendToken(2, ""), FinishReason::kNone);
  EXPECT_EQ(checker.AppendToken(9, "more"), FinishReason::kNone);
  EXPECT_EQ(checker.text(), "more");
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(checker.AppendToken(9, "x"), FinishReason::kNone);
}

TEST(StopChecker, MaxTokensEndsWithLength) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop = {"END"};
  StopChecker checker(p, {2});
  EXPECT_EQ(checker.AppendToken(10, "a"), FinishReason::kNone);
  EXPECT_EQ(checker.AppendToken(11, "b"), FinishReason::kNone);
  EXPECT_EQ(checker.AppendToken(12, "E"), FinishReason::kLength);
  EXPECT_EQ(checker.TakeReady(), "abE");  // the held "E" is released
  EXPECT_EQ(checker.num_tokens(), 3);
}

TEST(StopChecker, PrecedenceOnOneToken) {
  SamplingParams p;
  p.stop = {"##"};
  p.max_tokens = 2;
  {
    StopChecker checker(p, {2});
    EXPECT_EQ(checker.AppendToken(10, "a#"), FinishReason::kNone);
    EXPECT_EQ(checker.AppendToken(11, "#b"), FinishReason::kStop);  // stop beats length
    EXPECT_EQ(checker.text(), "a");
    EXPECT_EQ(checker.matched_stop(), "##");
  }
  {
    p.max_tokens = 1;
    StopChecker checker(p, {2});
    EXPECT_EQ(checker.AppendToken(2, "##"), FinishReason::kEos);  // EOS beats both
    EXPECT_EQ(checker.text(), "");
  }
}

TEST(StopChecker, FinishFromOutsideReleasesAndSticks) {
  StopChecker checker({"<|end|>"});
  checker.AppendText("answer <|e");
  EXPECT_EQ(checker.TakeReady(), "answer ");
  checker.Finish(FinishReason::kLength);
  EXPECT_EQ(checker.TakeReady(), "<|e");
  checker.Finish(FinishReason::kEos);
  EXPECT_EQ(checker.finish_reason(), FinishReason::kLength);
  EXPECT_FALSE(checker.AppendText("nd|>"));
  EXPECT_EQ(checker.text(), "answer <|e");
}

TEST(StopChecker, FinishReasonNames) {
  EXPECT_STREQ(ToString(FinishReason::kNone), "none");
  EXPECT_STREQ(ToString(FinishReason::kStop), "stop");
  EXPECT_STREQ(ToString(FinishReason::kLength), "length");
  EXPECT_STREQ(ToString(FinishReason::kEos), "eos");
}

}  // namespace
}  // namespace llmc
