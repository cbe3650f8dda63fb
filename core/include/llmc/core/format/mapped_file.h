// A read-only memory mapping of a whole file. Model files are never copied
// into memory: readers hand out pointers into the mapping, and the pages are
// faulted in when a tensor is first touched.
#ifndef LLMC_CORE_FORMAT_MAPPED_FILE_H_
#define LLMC_CORE_FORMAT_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace llmc {

class MappedFile {
 public:
  // Maps `path` read-only. Errors name the path and the failing call.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  // `size` bytes of anonymous memory, named `name` (path() returns it), that
  // `fill` writes once; read-only afterwards, like a file's mapping. For data
  // generated at load rather than read (dummy weights). Errors from `fill`
  // are returned as they are.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Anonymous(
      const std::string& name, size_t size, const std::function<absl::Status(uint8_t*)>& fill);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace llmc

#endif  // LLMC_CORE_FORMAT_MAPPED_FILE_H_
