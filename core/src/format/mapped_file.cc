#include "llmc/core/format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace llmc {

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(absl::StrFormat("%s: cannot open: %s", path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: not a regular file%s%s", path, err ? ": " : "", err ? std::strerror(err) : ""));
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrFormat("%s: mmap failed: %s", path, std::strerror(err)));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Anonymous(
    const std::string& name, size_t size, const std::function<absl::Status(uint8_t*)>& fill) {
  if (size == 0) {
    if (auto st = fill(nullptr); !st.ok()) return st;
    return std::shared_ptr<MappedFile>(new MappedFile(name, nullptr, 0));
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: cannot allocate %d bytes: %s", name, size, std::strerror(errno)));
  // Owned from here: the destructor unmaps on every path.
  std::shared_ptr<MappedFile> file(new MappedFile(name, static_cast<const uint8_t*>(p), size));
  (void)::madvise(p, size, MADV_HUGEPAGE);  // best effort: fewer faults while filling
  if (auto st = fill(static_cast<uint8_t*>(p)); !st.ok()) return st;
  (void)::mprotect(p, size, PROT_READ);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace llmc
