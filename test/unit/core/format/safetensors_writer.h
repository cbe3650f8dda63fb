// Test helper: builds safetensors images in memory and writes them into a
// per-test temporary folder, so the reader's tests need no checked-in binaries
// and each corrupt case is spelled out next to the test that uses it.
#ifndef LLMC_TEST_UNIT_RUNTIME_FORMAT_SAFETENSORS_WRITER_H_
#define LLMC_TEST_UNIT_RUNTIME_FORMAT_SAFETENSORS_WRITER_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace llmc::test {

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;  // raw little-endian contents
};

// u64 little-endian `header.size()` | header | data: any header text at all,
// for the corrupt cases.
inline std::string RawSafetensors(const std::string& header, const std::string& data = "") {
  std::string image(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) image[i] = static_cast<char>(n >> (8 * i));
  return image + header + data;
}

inline std::string ShapeJson(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// A well-formed image: tensors back to back in the given order, the header
// padded with spaces to a multiple of 8 as the reference writer does.
inline std::string BuildSafetensors(const std::vector<TensorSpec>& tensors,
                                    const std::string& metadata_json = "") {
  std::string header = "{";
  std::string data;
  if (!metadata_json.empty()) header += "\"__metadata__\":" + metadata_json;
  for (const TensorSpec& t : tensors) {
    if (header.size() > 1) header += ",";
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":" + ShapeJson(t.shape) +
              ",\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  return RawSafetensors(header, data);
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A fresh folder under the test temp dir, removed when the object dies.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = ::testing::TempDir() + "llmc_format_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to <folder>/<name> and returns the full path.
  std::string Write(const std::string& name, const std::string& contents) const {
    std::string p = File(name);
    WriteFile(p, contents);
    return p;
  }

 private:
  std::string path_;
};

}  // namespace llmc::test

#endif  // LLMC_TEST_UNIT_RUNTIME_FORMAT_SAFETENSORS_WRITER_H_
