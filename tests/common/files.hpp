// Test helpers for files: a path in the temporary directory that no other test process
// uses, writing bytes to a file (the file-format tests write broken files on purpose), and a
// temporary file removed when its guard goes.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace test {

inline std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("et_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// `bytes` written to a temporary file that is removed when the guard goes.
struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::vector<unsigned char>& bytes) : path(temporary_path(name)) {
    write_bytes(path, bytes);
  }
  ~TempFile() { std::remove(path.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

}  // namespace test
