// libFuzzer target: ParseSafetensorsHeader on arbitrary bytes. Beyond "never
// crash", whatever parses must describe bytes inside the input, so that a
// consumer can read every tensor it is handed.
#include <cstdint>
#include <cstdlib>

#include "llmc/core/format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensors = llmc::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  if (!tensors.ok()) return 0;
  const uint8_t* end = data + size;
  uint8_t sum = 0;
  for (const llmc::SafetensorsTensor& t : *tensors) {
    if (t.data < data + 8 || t.byte_size > static_cast<uint64_t>(end - t.data)) std::abort();
    // Touch the first and last byte so ASan checks the range too.
    if (t.byte_size > 0) sum ^= t.data[0] ^ t.data[t.byte_size - 1];
  }
  volatile uint8_t sink = sum;
  (void)sink;
  return 0;
}
