// Writes a GGUF v3 file that holds metadata only (no tensors). Artifacts use
// it to carry a GGUF model's tokenizer (the `tokenizer.*` keys) so the runtime
// loads it with the same reader and Tokenizer::FromGguf.
#ifndef LLMC_CORE_FORMAT_GGUF_WRITER_H_
#define LLMC_CORE_FORMAT_GGUF_WRITER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "llmc/core/format/gguf.h"

namespace llmc {

absl::Status WriteGgufMetadata(const std::string& path,
                               const std::vector<std::pair<std::string, GgufValue>>& metadata);

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_GGUF_WRITER_H_
