// IDX files, the format of MNIST and Fashion-MNIST (LeCun's): images as uint8 and labels
// as int64 host tensors.
//
//   auto images = et::data::read_idx_images("train-images-idx3-ubyte");  // Tensor<uint8_t, 3, Cpu> [n, 28, 28]
//   auto labels = et::data::read_idx_labels("train-labels-idx1-ubyte");  // Tensor<int64_t, 1, Cpu> [n]
//   auto x = et::eval(et::cast<float>(images) / 255.0f);                 // the usual scaling
//
// The format: two zero bytes, a type byte (0x08: unsigned bytes), the rank, each extent as
// a big-endian 32-bit integer, then the values in row-major order. Files are read as they
// are on disk, not gzip-compressed (scripts/install-deps unpacks Fashion-MNIST's). Every
// part is checked against what the file holds before anything is allocated: a file that is
// not IDX (a gzip stream is named as one), of another element type or rank, whose extents
// overflow, that is shorter than its header says or has bytes after its data, is an
// et::Error naming the file and what was found; nothing is read past the file's end.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "et/device.hpp"
#include "et/io/files.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"

namespace et::data {

namespace detail {

/// An open IDX file, its header read and checked: `extents` and the data's byte count,
/// which the file holds exactly.
struct IdxFile {
  io::File file{nullptr, &std::fclose};
  std::vector<std::int64_t> extents;
  std::int64_t count = 1;  ///< the product of the extents: the number of values
};

inline const char* idx_type_name(unsigned type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

inline std::string hex_byte(unsigned byte) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", byte & 0xFFu);
  return text;
}

/// Opens `path` and checks that it is an IDX file of unsigned bytes and rank `rank` whose
/// size is exactly its header's plus its data's.
inline IdxFile open_idx(const std::string& path, int rank, const char* what, const char* holds) {
  const std::string where = std::string("et: ") + what + ": " + path;
  IdxFile idx;
  std::int64_t size = 0;
  idx.file = io::open_for_reading(path, std::string("et: ") + what, size);
  std::FILE* f = idx.file.get();
  unsigned char magic[4] = {};
  if (size < 4)
    throw Error(where + ": not an IDX file: " + std::to_string(size) + " bytes, shorter than the 4-byte magic number");
  if (std::fread(magic, 1, 4, f) != 4) throw Error(where + ": cannot read it: " + std::strerror(errno));
  if (magic[0] == 0x1F && magic[1] == 0x8B)
    throw Error(where + ": a gzip stream, not an IDX file: unpack it first (gunzip)");
  if (magic[0] != 0 || magic[1] != 0)
    throw Error(where + ": not an IDX file: it begins with " + hex_byte(magic[0]) + " " + hex_byte(magic[1]) +
                ", not two zero bytes");
  if (magic[2] != 0x08)
    throw Error(where + ": holds " + idx_type_name(magic[2]) + " values (type " + hex_byte(magic[2]) + "); " + holds +
                " are unsigned bytes (type 0x08)");
  if (magic[3] != rank)
    throw Error(where + ": holds a rank-" + std::to_string(magic[3]) + " array; " + holds + " are rank " +
                std::to_string(rank) + (rank == 3 ? " (count, rows, columns)" : " (count)"));
  const std::int64_t header = 4 + 4 * std::int64_t{rank};
  if (size < header)
    throw Error(where + ": truncated: " + std::to_string(size) + " bytes, shorter than its " + std::to_string(header) +
                "-byte header");
  const std::int64_t data = size - header;
  std::string shape;
  bool empty = false;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    if (std::fread(b, 1, 4, f) != 4) throw Error(where + ": cannot read its header: " + std::strerror(errno));
    const std::int64_t extent = (std::int64_t{b[0]} << 24) | (std::int64_t{b[1]} << 16) | (std::int64_t{b[2]} << 8) | b[3];
    shape += (d == 0 ? "" : " x ") + std::to_string(extent);
    idx.extents.push_back(extent);
    empty = empty || extent == 0;
  }
  // The product, stopped (-1) once it passes the file's data: it never overflows.
  for (const std::int64_t extent : idx.extents) {
    if (empty) idx.count = 0;
    else if (idx.count >= 0) idx.count = idx.count > data / extent ? -1 : idx.count * extent;
  }
  if (idx.count < 0 || idx.count > data)
    throw Error(where + ": truncated: its header gives " + shape + " values, the file holds " + std::to_string(data) +
                " bytes after its " + std::to_string(header) + "-byte header");
  if (idx.count < data)
    throw Error(where + ": " + std::to_string(data - idx.count) + " bytes after the " + shape +
                " values its header gives: not one IDX array");
  return idx;
}

/// Reads the file's `count` bytes into `out`.
inline void read_idx_values(IdxFile& idx, void* out, const std::string& path, const char* what) {
  io::read_exactly(idx.file.get(), out, idx.count, std::string("et: ") + what + ": " + path, "its values");
}

}  // namespace detail

/// An IDX3 file of unsigned bytes (MNIST's images): [count, rows, columns] on the host.
inline Tensor<std::uint8_t, 3, Cpu> read_idx_images(const std::string& path) {
  auto idx = detail::open_idx(path, 3, "read_idx_images", "images");
  auto images = Tensor<std::uint8_t, 3, Cpu>::allocate(Shape<3>{idx.extents[0], idx.extents[1], idx.extents[2]});
  detail::read_idx_values(idx, images.data(), path, "read_idx_images");
  return images;
}

/// An IDX1 file of unsigned bytes (MNIST's labels), widened to int64, the type of the
/// losses' class indices: [count] on the host.
inline Tensor<std::int64_t, 1, Cpu> read_idx_labels(const std::string& path) {
  auto idx = detail::open_idx(path, 1, "read_idx_labels", "labels");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(idx.count));
  detail::read_idx_values(idx, bytes.data(), path, "read_idx_labels");
  auto labels = Tensor<std::int64_t, 1, Cpu>::allocate(Shape<1>{idx.count});
  std::int64_t* out = labels.data();
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = bytes[i];
  return labels;
}

}  // namespace et::data
