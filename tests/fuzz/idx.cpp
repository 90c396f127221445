// libFuzzer target: IDX files (et::data::read_idx_images and read_idx_labels: the magic, the
// type and rank bytes, big-endian extents against the file's size). Any input is an
// et::Error or a tensor whose elements are exactly the file's bytes after its header.
#include "fuzz_file.hpp"

#include <et/data/idx.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file;
  const std::string& path = file.hold(data, size);
  try {
    const auto images = et::data::read_idx_images(path);
    const std::size_t header = 16;
    if (size < header || std::size_t(images.numel()) != size - header) std::abort();
    if (images.numel() > 0 && std::memcmp(images.data(), data + header, size - header) != 0) std::abort();
  } catch (const et::Error&) {
  }
  try {
    const auto labels = et::data::read_idx_labels(path);
    const std::size_t header = 8;
    if (size < header || std::size_t(labels.numel()) != size - header) std::abort();
    const std::int64_t* values = labels.data();
    for (std::size_t i = 0; i < size - header; ++i)
      if (values[i] != data[header + i]) std::abort();
  } catch (const et::Error&) {
  }
  return 0;
}
