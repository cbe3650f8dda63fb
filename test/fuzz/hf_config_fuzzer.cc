// libFuzzer target: ParseHFConfig on arbitrary text. Beyond "never crash" (no
// exception may escape either), an accepted config must pass
// ValidateModelConfig, which ParseHFConfig promises to have called.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "llmc/core/format/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = llmc::ParseHFConfig(text, "fuzz/config.json");
  if (config.ok() && !llmc::ValidateModelConfig(*config).ok()) std::abort();
  return 0;
}
