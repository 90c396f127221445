// The fuzz targets' one helper: the input bytes as a file the readers open by name (an
// anonymous memory file, /proc/self/fd/N), so that each target drives the public reader
// exactly as a user's program calls it, opening and sizing included.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace fuzz {

class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("et_fuzz", 0)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  /// The file's contents become `data`; returns its path.
  const std::string& hold(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace fuzz
