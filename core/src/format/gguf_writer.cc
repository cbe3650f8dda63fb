#include "llmc/core/format/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"

namespace llmc {
namespace {

class Out {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data.insert(data.end(), b, b + n);
  }
  template <typename T>
  void Pod(T v) {
    Bytes(&v, sizeof v);  // GGUF is little endian, as is every host llmc targets
  }
  void String(const std::string& s) {
    Pod<uint64_t>(s.size());
    Bytes(s.data(), s.size());
  }
  std::vector<uint8_t> data;
};

// Writes one value of `type` taken from the widened forms GgufValue keeps.
absl::Status Scalar(Out& out, GgufType type, uint64_t u, int64_t i, double f, bool b,
                    const std::string& s) {
  switch (type) {
    case GgufType::kUint8: out.Pod<uint8_t>(uint8_t(u)); break;
    case GgufType::kInt8: out.Pod<int8_t>(int8_t(i)); break;
    case GgufType::kUint16: out.Pod<uint16_t>(uint16_t(u)); break;
    case GgufType::kInt16: out.Pod<int16_t>(int16_t(i)); break;
    case GgufType::kUint32: out.Pod<uint32_t>(uint32_t(u)); break;
    case GgufType::kInt32: out.Pod<int32_t>(int32_t(i)); break;
    case GgufType::kUint64: out.Pod<uint64_t>(u); break;
    case GgufType::kInt64: out.Pod<int64_t>(i); break;
    case GgufType::kFloat32: out.Pod<float>(float(f)); break;
    case GgufType::kFloat64: out.Pod<double>(f); break;
    case GgufType::kBool: out.Pod<uint8_t>(b ? 1 : 0); break;
    case GgufType::kString: out.String(s); break;
    case GgufType::kArray: return absl::InvalidArgumentError("nested arrays are not written");
  }
  return absl::OkStatus();
}

bool IsFloat(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kFloat64; }

}  // namespace

absl::Status WriteGgufMetadata(const std::string& path,
                               const std::vector<std::pair<std::string, GgufValue>>& metadata) {
  Out out;
  out.Bytes("GGUF", 4);
  out.Pod<uint32_t>(3);
  out.Pod<uint64_t>(0);  // tensors
  out.Pod<uint64_t>(metadata.size());
  for (const auto& [key, v] : metadata) {
    out.String(key);
    out.Pod<uint32_t>(uint32_t(v.type));
    absl::Status st;
    if (v.type == GgufType::kArray) {
      out.Pod<uint32_t>(uint32_t(v.array_type));
      GgufType t = v.array_type;
      size_t n = t == GgufType::kString ? v.strings.size()
                 : IsFloat(t)           ? v.floats.size()
                                        : v.ints.size();
      out.Pod<uint64_t>(n);
      for (size_t i = 0; i < n && st.ok(); ++i) {
        if (t == GgufType::kString)
          st = Scalar(out, t, 0, 0, 0, false, v.strings[i]);
        else if (IsFloat(t))
          st = Scalar(out, t, 0, 0, v.floats[i], false, "");
        else
          st = Scalar(out, t, uint64_t(v.ints[i]), v.ints[i], 0, v.ints[i] != 0, "");
      }
    } else {
      uint64_t u = 0;
      int64_t i = 0;
      double f = 0;
      bool b = false;
      std::string s;
      if (const auto* p = std::get_if<uint64_t>(&v.scalar)) u = *p, i = int64_t(*p);
      if (const auto* p = std::get_if<int64_t>(&v.scalar)) i = *p, u = uint64_t(*p);
      if (const auto* p = std::get_if<double>(&v.scalar)) f = *p;
      if (const auto* p = std::get_if<bool>(&v.scalar)) b = *p;
      if (const auto* p = std::get_if<std::string>(&v.scalar)) s = *p;
      st = Scalar(out, v.type, u, i, f, b, s);
    }
    if (!st.ok())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: key '%s': %s", path, key, std::string(st.message())));
  }
  // Pad to the default alignment: the (empty) data section starts aligned.
  while (out.data.size() % 32 != 0) out.data.push_back(0);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return absl::InternalError(absl::StrFormat("%s: cannot write: %s", path, std::strerror(errno)));
  if (std::fwrite(out.data.data(), 1, out.data.size(), f.get()) != out.data.size())
    return absl::InternalError(absl::StrFormat("%s: short write", path));
  return absl::OkStatus();
}

}  // namespace llmc
