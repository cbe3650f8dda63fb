// libFuzzer target: ManifestFromJson on arbitrary bytes must return an error
// or a manifest, never crash, hang or let an exception out. A manifest it
// accepts must pass ValidateManifest (every index and offset in range: the
// runtime indexes with them unchecked) and survive ManifestToJson →
// ManifestFromJson unchanged.
//
// Seeds: test/fuzz/corpus/manifest/ (a complete manifest, a GPU+host one, a
// minimal one without tokenizer or steps, a two-rank tensor-parallel one with
// collectives, and a few broken ones).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "llmc/core/artifact/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto manifest = llmc::ManifestFromJson(text, "fuzz/manifest.json");
  if (!manifest.ok()) return 0;
  if (!llmc::ValidateManifest(*manifest, "fuzz/manifest.json").ok()) std::abort();
  std::string json = llmc::ManifestToJson(*manifest);
  auto again = llmc::ManifestFromJson(json, "fuzz/manifest.json");
  if (!again.ok() || llmc::ManifestToJson(*again) != json) std::abort();
  return 0;
}
