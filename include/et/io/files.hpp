// Files by name, opened, read and written one way for every reader and writer of files (IDX,
// token files, safetensors): a path the C library would open as another file is refused, a
// file that cannot be opened, sized or read is an et::Error naming it and the system's reason,
// and a file is written whole or not at all (a temporary renamed into place).
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "et/runtime/error.hpp"

namespace et::io {

/// Throws et::Error (starting with `where`) when `path` cannot name a file as written: it is
/// empty, or it holds a NUL byte, where the C library would cut it and open another file.
inline void require_file_path(const std::string& path, const std::string& where) {
  if (path.empty()) throw Error(where + ": an empty path");
  if (const std::size_t nul = path.find('\0'); nul != std::string::npos) {
    std::string shown = path;  // the NUL bytes written out, so that the message is not cut there too
    for (std::size_t at = shown.find('\0'); at != std::string::npos; at = shown.find('\0', at + 2))
      shown.replace(at, 1, "\\0");
    throw Error(where + ": the path \"" + shown + "\" holds a NUL byte at offset " + std::to_string(nul) +
                " (the system would open \"" + path.substr(0, nul) + "\", another file)");
  }
}

/// A file open for reading, closed when it goes.
using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

/// Opens `path` for reading in binary and reports its size in bytes (a directory, a stream or a
/// file that cannot be sized is an et::Error). `where` starts every message ("et: read_tokens").
inline File open_for_reading(const std::string& path, const std::string& where, std::int64_t& size) {
  require_file_path(path, where);
  const std::string named = where + ": " + path;
  File file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error(named + ": cannot open it: " + std::strerror(errno));
  // The size from the file system: a directory opens, and seeking to its end may report a
  // size it does not have (ext4 reports a hash), so only a regular file is read.
  struct stat status {};
  if (::fstat(::fileno(file.get()), &status) != 0) throw Error(named + ": cannot read it: " + std::strerror(errno));
  if (S_ISDIR(status.st_mode)) throw Error(named + ": cannot read it: a directory, not a file");
  if (!S_ISREG(status.st_mode)) throw Error(named + ": cannot read it: not a regular file (a device, a pipe or a socket)");
  size = static_cast<std::int64_t>(status.st_size);
  return file;
}

/// Reads exactly `bytes` bytes into `out` (et::Error naming `what` if the file ends early or fails).
inline void read_exactly(std::FILE* file, void* out, std::int64_t bytes, const std::string& where, const char* what) {
  if (bytes <= 0) return;
  if (std::fread(out, 1, static_cast<std::size_t>(bytes), file) != static_cast<std::size_t>(bytes))
    throw Error(where + ": cannot read " + what + ": " + (std::ferror(file) ? std::strerror(errno) : "the file ended early"));
}

/// The whole file's bytes.
inline std::vector<unsigned char> read_file(const std::string& path, const std::string& where) {
  std::int64_t size = 0;
  File file = open_for_reading(path, where, size);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(size));
  read_exactly(file.get(), bytes.data(), size, where + ": " + path, "its bytes");
  return bytes;
}

/// Writes `bytes` to `path` through a temporary file (path + ".partial") renamed into place:
/// et::Error (starting with `where`) on failure, and an existing file at `path` stays as it was.
inline void write_file(const std::string& path, const std::vector<unsigned char>& bytes, const std::string& where) {
  require_file_path(path, where);
  const std::string temporary = path + ".partial";
  File out(std::fopen(temporary.c_str(), "wb"), &std::fclose);
  if (!out) throw Error(where + ": cannot open " + temporary + " to write: " + std::strerror(errno));
  const bool written = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), out.get()) == bytes.size();
  const bool closed = std::fclose(out.release()) == 0;
  if (!written || !closed) {
    std::remove(temporary.c_str());
    throw Error(where + ": cannot write " + temporary + " (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw Error(where + ": cannot move " + temporary + " to " + path + ": " + reason);
  }
}

}  // namespace et::io
