// Test helpers for files: a path in the temporary directory that no other test process
// uses, and writing bytes to a file (the file-format tests write broken files on purpose).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace test {

inline std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("et_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace test
