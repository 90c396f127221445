// The safetensors file format (the weight format PyTorch, JAX and others exchange), read and
// written byte-exactly as the reference implementation does:
//
//   8 bytes   N, the header's length (unsigned, little-endian)
//   N bytes   a JSON object: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//             ..., "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   the rest  the tensors' bytes (little-endian, row-major), at their offsets, with no gaps
//
// Tensors are laid out as safetensors' own writer lays them out: by its dtype order
// descending (U64, I64, F64, F32, ...: decreasing alignment), then by name; the header lists
// "__metadata__" first (its keys sorted here; the reference's order is a hash map's), then
// the tensors in that order, compact, padded with spaces to a multiple of 8 bytes. Reading checks what the reference reader checks (offsets that cover the
// data exactly, shapes that match the byte counts, no duplicate names) and throws et::Error
// naming the file and the problem.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "et/io/files.hpp"
#include "et/io/json.hpp"
#include "et/runtime/error.hpp"

namespace et::io {

/// One tensor of a safetensors file, its bytes on the host.
struct SafeTensor {
  std::string dtype;                 ///< "F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", ...
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;  ///< row-major, little-endian
};

/// A safetensors file: its tensors by name and its "__metadata__" strings.
struct SafeTensorsFile {
  std::map<std::string, SafeTensor> tensors;
  std::map<std::string, std::string> metadata;
};

namespace detail {

static_assert(std::endian::native == std::endian::little, "et: safetensors I/O assumes a little-endian host");

/// The safetensors dtypes in the reference's order (its Dtype enum: increasing alignment),
/// with their sizes in bytes.
struct DtypeInfo {
  const char* name;
  std::size_t size;
};
inline constexpr DtypeInfo dtypes[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                       {"I16", 2},  {"U16", 2},  {"F16", 2},  {"BF16", 2},    {"I32", 4},
                                       {"U32", 4},  {"F32", 4},  {"F64", 8},  {"I64", 8},     {"U64", 8}};

/// The dtype's place in that order; -1 for a name it does not define.
inline int dtype_rank(const std::string& dtype) {
  for (int i = 0; i < int(std::size(dtypes)); ++i)
    if (dtype == dtypes[i].name) return i;
  return -1;
}

/// Bytes per element; 0 for a name safetensors does not define.
inline std::size_t dtype_size(const std::string& dtype) {
  const int rank = dtype_rank(dtype);
  return rank < 0 ? 0 : dtypes[rank].size;
}

[[noreturn]] inline void bad_file(const std::string& path, const std::string& problem) {
  throw Error("et: " + path + " is not a valid safetensors file: " + problem);
}

/// "[2, 3]"
inline std::string format_extents(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

inline std::uint64_t element_count(const std::vector<std::int64_t>& shape, bool& overflow) {
  std::uint64_t count = 1;
  for (const std::int64_t extent : shape) {
    if (extent < 0 || __builtin_mul_overflow(count, static_cast<std::uint64_t>(extent), &count)) overflow = true;
  }
  return count;
}

}  // namespace detail

/// The file's bytes as a safetensors file, for `path` in messages.
inline SafeTensorsFile parse_safetensors(const std::vector<unsigned char>& file, const std::string& path) {
  if (file.size() < 8) detail::bad_file(path, "shorter than its 8-byte header length");
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  if (header_size > file.size() - 8 || header_size > 100'000'000)
    detail::bad_file(path, "a header of " + std::to_string(header_size) + " bytes in a file of " +
                               std::to_string(file.size()));
  const std::string text(reinterpret_cast<const char*>(file.data()) + 8, header_size);
  if (text.empty() || text.front() != '{') detail::bad_file(path, "the header does not start with '{'");
  const Json header = parse_json(text, path);
  if (header.kind != Json::Kind::object) detail::bad_file(path, "the header is not a JSON object");
  const std::uint64_t data_size = file.size() - 8 - header_size;
  const unsigned char* data = file.data() + 8 + header_size;

  SafeTensorsFile out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, entry] : header.object) {
    if (out.tensors.count(name) != 0 || (name == "__metadata__" && !out.metadata.empty()))
      detail::bad_file(path, "the name \"" + name + "\" appears twice");
    if (name == "__metadata__") {
      if (entry.kind != Json::Kind::object) detail::bad_file(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.object) {
        if (value.kind != Json::Kind::string) detail::bad_file(path, "__metadata__[\"" + key + "\"] is not a string");
        out.metadata[key] = value.string;
      }
      continue;
    }
    const auto what = "tensor \"" + name + "\": ";
    if (entry.kind != Json::Kind::object) detail::bad_file(path, what + "not a JSON object");
    const Json* dtype = entry.find("dtype");
    const Json* shape = entry.find("shape");
    const Json* offsets = entry.find("data_offsets");
    if (!dtype || dtype->kind != Json::Kind::string || !shape || shape->kind != Json::Kind::array || !offsets ||
        offsets->kind != Json::Kind::array || offsets->array.size() != 2 || entry.object.size() != 3)
      detail::bad_file(path, what + "needs exactly \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)");
    SafeTensor tensor{dtype->string, {}, {}};
    const std::size_t element_size = detail::dtype_size(tensor.dtype);
    if (element_size == 0) detail::bad_file(path, what + "unknown dtype \"" + tensor.dtype + "\"");
    for (const Json& extent : shape->array) tensor.shape.push_back(extent.as_index(path));
    const std::uint64_t begin = static_cast<std::uint64_t>(offsets->array[0].as_index(path));
    const std::uint64_t end = static_cast<std::uint64_t>(offsets->array[1].as_index(path));
    bool overflow = false;
    const std::uint64_t count = detail::element_count(tensor.shape, overflow);
    std::uint64_t bytes = 0;
    if (overflow || __builtin_mul_overflow(count, element_size, &bytes))
      detail::bad_file(path, what + "its shape " + detail::format_extents(tensor.shape) + " of " + tensor.dtype +
                                 " needs more bytes than fit in 64 bits");
    if (begin > end || end - begin != bytes)
      detail::bad_file(path, what + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                 "] do not hold its shape's " + std::to_string(count) + " elements of " +
                                 tensor.dtype);
    if (end > data_size)
      detail::bad_file(path, what + "its data ends at " + std::to_string(end) + ", past the " +
                                 std::to_string(data_size) + " bytes of data");
    tensor.bytes.assign(data + begin, data + end);
    spans.emplace_back(begin, end);
    out.tensors.emplace(name, std::move(tensor));
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != covered) detail::bad_file(path, "the tensors' data overlap or leave a gap at byte " + std::to_string(covered));
    covered = end;
  }
  if (covered != data_size)
    detail::bad_file(path, "the tensors cover " + std::to_string(covered) + " of the " + std::to_string(data_size) +
                               " data bytes");
  return out;
}

/// The bytes of a safetensors file holding `file`.
inline std::vector<unsigned char> serialize_safetensors(const SafeTensorsFile& file) {
  std::vector<const std::pair<const std::string, SafeTensor>*> order;
  for (const auto& entry : file.tensors) {
    const std::size_t element_size = detail::dtype_size(entry.second.dtype);
    if (element_size == 0) throw Error("et: safetensors has no dtype \"" + entry.second.dtype + "\"");
    bool overflow = false;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(detail::element_count(entry.second.shape, overflow), element_size, &bytes) ||
        overflow || bytes != entry.second.bytes.size())
      throw Error("et: safetensors: tensor \"" + entry.first + "\" has " + std::to_string(entry.second.bytes.size()) +
                  " bytes, not its shape's");
    order.push_back(&entry);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return detail::dtype_rank(a->second.dtype) > detail::dtype_rank(b->second.dtype);  // then by name (map order)
  });
  std::string header = "{";
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : file.metadata) header += json_string(key) + ":" + json_string(value) + ",";
    header.back() = '}';
    header += ",";
  }
  std::uint64_t offset = 0;
  for (const auto* entry : order) {
    header += json_string(entry->first) + ":{\"dtype\":" + json_string(entry->second.dtype) + ",\"shape\":[";
    for (std::size_t i = 0; i < entry->second.shape.size(); ++i) {
      if (i > 0) header += ',';
      header += std::to_string(entry->second.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + entry->second.bytes.size()) + "]},";
    offset += entry->second.bytes.size();
  }
  if (header.size() > 1) header.pop_back();
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t header_size = header.size();
  std::vector<unsigned char> out(8 + header.size() + offset);  // sized once, filled by memcpy
  std::memcpy(out.data(), &header_size, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::size_t at = 8 + header.size();
  for (const auto* entry : order) {
    if (!entry->second.bytes.empty()) std::memcpy(out.data() + at, entry->second.bytes.data(), entry->second.bytes.size());
    at += entry->second.bytes.size();
  }
  return out;
}

/// Reads a safetensors file (et::Error if it cannot be read or is not valid).
inline SafeTensorsFile read_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path, "et: read_safetensors"), path);
}

/// Writes one, through a temporary file renamed into place (et::Error on failure; an
/// existing file at `path` stays as it was then).
inline void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  require_file_path(path, "et: write_safetensors");
  write_file(path, serialize_safetensors(file), "et: write_safetensors: " + path);
}

}  // namespace et::io
