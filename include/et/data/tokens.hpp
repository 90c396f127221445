// Token files, the format llm.c and nanoGPT's tokenizing scripts write: a header of 256
// little-endian int32 (the magic 20240520 for GPT-2's uint16 tokens or 20240801 for LLaMA 3's
// uint32 ones, the version 1, the token count), then the tokens, little-endian.
//
//   auto tokens = et::data::read_tokens("fineweb_train_000001.bin");   // Tensor<int64_t, 1, Cpu> [n]
//   et::data::write_tokens("kjv.bin", tokens);                         // uint16 if every token fits
//   auto ids = et::data::ByteTokenizer::encode(text);                 // a token a byte: vocabulary 256
//
// Every field is checked against the file before anything is allocated: another magic or
// version, a negative count, a file whose length is not exactly the header's and the count's
// tokens, are et::Errors naming the file and the fault; nothing is read past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "et/device.hpp"
#include "et/exec/assign.hpp"  // a moved window handle writes (Tensor::write)
#include "et/io/files.hpp"
#include "et/runtime/error.hpp"
#include "et/tensor.hpp"

namespace et::data {

namespace detail {

inline constexpr std::int32_t tokens_magic_u16 = 20240520;  ///< GPT-2's files: uint16 tokens
inline constexpr std::int32_t tokens_magic_u32 = 20240801;  ///< LLaMA 3's files: uint32 tokens
inline constexpr std::int64_t tokens_header_bytes = 256 * 4;

inline std::int32_t little_int32(const unsigned char* bytes) {
  return static_cast<std::int32_t>(std::uint32_t{bytes[0]} | std::uint32_t{bytes[1]} << 8 |
                                   std::uint32_t{bytes[2]} << 16 | std::uint32_t{bytes[3]} << 24);
}

}  // namespace detail

/// A token file (see the file comment) as int64 tokens on the host: [count].
inline Tensor<std::int64_t, 1, Cpu> read_tokens(const std::string& path) {
  const std::string where = "et: read_tokens: " + path;
  std::int64_t size = 0;
  io::File file = io::open_for_reading(path, "et: read_tokens", size);
  if (size < detail::tokens_header_bytes)
    throw Error(where + ": not a token file: " + std::to_string(size) + " bytes, shorter than its " +
                std::to_string(detail::tokens_header_bytes) + "-byte header");
  unsigned char header[detail::tokens_header_bytes];
  io::read_exactly(file.get(), header, detail::tokens_header_bytes, where, "its header");
  const std::int32_t magic = detail::little_int32(header), version = detail::little_int32(header + 4);
  const std::int32_t count = detail::little_int32(header + 8);
  if (magic != detail::tokens_magic_u16 && magic != detail::tokens_magic_u32)
    throw Error(where + ": not a token file: its magic number is " + std::to_string(magic) + ", not " +
                std::to_string(detail::tokens_magic_u16) + " (uint16 tokens) or " +
                std::to_string(detail::tokens_magic_u32) + " (uint32 tokens)");
  if (version != 1) throw Error(where + ": version " + std::to_string(version) + "; read_tokens reads version 1");
  if (count < 0) throw Error(where + ": its header gives a negative token count, " + std::to_string(count));
  const std::int64_t width = magic == detail::tokens_magic_u16 ? 2 : 4;
  const std::int64_t data = size - detail::tokens_header_bytes;
  if (data != count * width)  // count < 2^31 and width <= 4: no overflow
    throw Error(where + ": its header gives " + std::to_string(count) + " tokens of " + std::to_string(width) +
                " bytes (" + std::to_string(count * width) + " bytes), the file holds " + std::to_string(data) +
                " bytes after its header");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(data));
  io::read_exactly(file.get(), bytes.data(), data, where, "its tokens");
  auto tokens = Tensor<std::int64_t, 1, Cpu>::allocate(Shape<1>{count});
  std::int64_t* out = tokens.data();
  const unsigned char* in = bytes.data();
  for (std::int64_t i = 0; i < count; ++i, in += width)
    out[i] = width == 2 ? std::int64_t{in[0]} | std::int64_t{in[1]} << 8
                        : std::int64_t{in[0]} | std::int64_t{in[1]} << 8 | std::int64_t{in[2]} << 16 |
                              std::int64_t{in[3]} << 24;
  return tokens;
}

/// Writes `tokens` (each in [0, 2^32)) as a token file: uint16 tokens (GPT-2's magic) when
/// every one is below 65536, else uint32 ones (LLaMA 3's). Through a temporary file renamed
/// into place; et::Error for a token out of range, more than 2^31 - 1 tokens or a failed write.
template <class T, class D>
void write_tokens(const std::string& path, const Tensor<T, 1, D>& tokens) {
  static_assert(std::is_integral_v<T>, "et: write_tokens writes integer tokens");
  const std::string where = "et: write_tokens: " + path;
  io::require_file_path(path, "et: write_tokens");
  const std::vector<T> values = tokens.to_vector();
  if (values.size() > 0x7FFFFFFFu)
    throw Error(where + ": " + std::to_string(values.size()) + " tokens; a token file holds at most 2^31 - 1");
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto v = static_cast<std::int64_t>(values[i]);
    if (v < 0 || v > 0xFFFFFFFFll)
      throw Error(where + ": token " + std::to_string(i) + " is " + std::to_string(v) + ", outside [0, 2^32)");
    largest = v > largest ? v : largest;
  }
  const std::int64_t width = largest < 65536 ? 2 : 4;
  std::vector<unsigned char> bytes(static_cast<std::size_t>(detail::tokens_header_bytes) + values.size() * width, 0);
  const auto put = [&](std::size_t at, std::uint32_t v, std::int64_t n) {
    for (std::int64_t b = 0; b < n; ++b) bytes[at + b] = static_cast<unsigned char>(v >> (8 * b));
  };
  put(0, static_cast<std::uint32_t>(width == 2 ? detail::tokens_magic_u16 : detail::tokens_magic_u32), 4);
  put(4, 1, 4);
  put(8, static_cast<std::uint32_t>(values.size()), 4);
  for (std::size_t i = 0; i < values.size(); ++i)
    put(detail::tokens_header_bytes + i * width, static_cast<std::uint32_t>(values[i]), width);
  io::write_file(path, bytes, where);
}

/// Byte-level tokens: each byte of the text (UTF-8 or anything else) is one token in [0, 256),
/// so every text has an encoding and decode(encode(t)) == t. A small GPT's vocabulary.
struct ByteTokenizer {
  static constexpr std::int64_t vocab_size = 256;
  static Tensor<std::int64_t, 1, Cpu> encode(const std::string& text) {
    auto tokens = Tensor<std::int64_t, 1, Cpu>::allocate(Shape<1>{static_cast<std::int64_t>(text.size())});
    for (std::size_t i = 0; i < text.size(); ++i) tokens.data()[i] = static_cast<unsigned char>(text[i]);
    return tokens;
  }
  /// et::Error for a token outside [0, 256) (naming its position).
  template <class T, class D>
  static std::string decode(const Tensor<T, 1, D>& tokens) {
    static_assert(std::is_integral_v<T>, "et: ByteTokenizer::decode takes integer tokens");
    const std::vector<T> values = tokens.to_vector();
    std::string text(values.size(), '\0');
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto v = static_cast<std::int64_t>(values[i]);
      if (v < 0 || v >= vocab_size)
        throw Error("et: ByteTokenizer::decode: token " + std::to_string(i) + " is " + std::to_string(v) +
                    ", outside [0, 256)");
      text[i] = static_cast<char>(static_cast<unsigned char>(v));
    }
    return text;
  }
};

}  // namespace et::data
