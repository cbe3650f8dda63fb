// libFuzzer target for the GGUF reader, the GGUF -> ModelConfig mapping and
// the dequantizers. Any input must either be rejected with a status or give a
// file whose every value can be read and whose every tensor's bytes lie inside
// the input (ASan checks the reads); a parsed tensor that Dequantize refuses
// is a bug in the reader's size checks, so it traps.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "llmc/core/format/dequantize.h"
#include "llmc/core/format/gguf.h"
#include "llmc/core/format/gguf_config.h"
#include "llmc/core/weight_format.h"

namespace {

// Elements dequantized at each end of a tensor: enough to cover several
// k-quant super-blocks, small enough to keep runs fast.
constexpr int64_t kWindowElems = 4096;

void TouchMetadata(const llmc::GgufFile& f) {
  size_t sink = 0;
  for (const auto& [key, v] : f.metadata()) {
    sink += key.size() + static_cast<size_t>(v.type) + static_cast<size_t>(v.array_type);
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            sink += x.size();
          } else if constexpr (std::is_same_v<T, double>) {
            sink += x > 0;  // a double cast to an integer could overflow
          } else {
            sink += static_cast<size_t>(x);
          }
        },
        v.scalar);
    for (const auto& s : v.strings) sink += s.size();
    for (int64_t i : v.ints) sink += static_cast<size_t>(i);
    for (double d : v.floats) sink += d > 0;
    sink += llmc::ToString(v.type)[0];
    // The typed getters must answer (value or error) for every key.
    sink += f.GetString(key).ok() + f.GetInt(key).ok() + f.GetFloat(key).ok() +
            f.GetBool(key).ok() + f.GetStringArray(key).ok() + f.GetIntArray(key).ok() +
            f.GetFloatArray(key).ok();
    if (f.Find(key) != &v) __builtin_trap();  // keys are unique
  }
  volatile size_t keep = sink;
  (void)keep;
}

void DequantizeEnds(const llmc::GgufFile& f, const llmc::GgufTensorInfo& t,
                    std::vector<float>& out) {
  auto format = llmc::LookupGgmlType(t.ggml_type);
  if (!format) __builtin_trap();  // the reader accepts only known types
  const int64_t block = format->block_elems;
  const int64_t blocks = t.num_elements() / block;
  const int64_t window = std::min(blocks, kWindowElems / block);
  if (static_cast<uint64_t>(blocks * format->block_bytes) != t.byte_size) __builtin_trap();
  out.resize(static_cast<size_t>(window * block));
  const uint8_t* data = f.TensorData(t);
  // The first and the last `window` blocks.
  for (const uint8_t* src : {data, data + (blocks - window) * format->block_bytes}) {
    size_t bytes = static_cast<size_t>(window * format->block_bytes);
    if (!llmc::Dequantize(format->name, src, bytes, window * block, out.data()).ok())
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = llmc::GgufFile::ParseBytes(data, size, "fuzz.gguf");
  if (!parsed.ok()) return 0;
  const llmc::GgufFile& f = **parsed;
  TouchMetadata(f);
  (void)llmc::ModelConfigFromGguf(f);
  std::vector<float> out;
  for (const auto& t : f.tensors()) {
    if (f.FindTensor(t.name) != &t) __builtin_trap();  // names are unique
    DequantizeEnds(f, t, out);
  }
  return 0;
}
