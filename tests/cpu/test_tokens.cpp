// Token files (data::read_tokens, write_tokens: llm.c's format): files built here byte by
// byte read back exactly, write_tokens' bytes are the format's, and every kind of broken file
// is an et::Error naming the file and the fault, nothing read past its end or allocated from
// what the header claims.
#include "../common/files.hpp"

#include <catch2/catch.hpp>

#include <et/et.hpp>
#include <et/nn.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {

using test::TempFile;
using Bytes = std::vector<unsigned char>;

void put32(Bytes& out, std::size_t at, std::uint32_t v) {
  for (int b = 0; b < 4; ++b) out[at + std::size_t(b)] = static_cast<unsigned char>(v >> (8 * b));
}

/// A token file's bytes: the 1024-byte header (magic, version, count; zeros after), then the
/// tokens little-endian in `width` bytes each.
Bytes token_bytes(std::uint32_t magic, std::uint32_t version, std::uint32_t count, const std::vector<std::uint32_t>& tokens,
                  int width) {
  Bytes out(1024, 0);
  put32(out, 0, magic);
  put32(out, 4, version);
  put32(out, 8, count);
  for (const std::uint32_t t : tokens)
    for (int b = 0; b < width; ++b) out.push_back(static_cast<unsigned char>(t >> (8 * b)));
  return out;
}

}  // namespace

TEST_CASE("token files: uint16 and uint32 tokens read back exactly, as int64", "[data][tokens]") {
  const TempFile gpt2("gpt2.bin", token_bytes(20240520, 1, 4, {0, 50256, 65535, 7}, 2));
  const et::Tensor<std::int64_t, 1, et::Cpu> tokens = et::data::read_tokens(gpt2.path);
  CHECK(tokens.to_vector() == std::vector<std::int64_t>{0, 50256, 65535, 7});
  const TempFile llama("llama.bin", token_bytes(20240801, 1, 3, {128000, 4294967295u, 1}, 4));
  CHECK(et::data::read_tokens(llama.path).to_vector() == std::vector<std::int64_t>{128000, 4294967295ll, 1});
  const TempFile none("none.bin", token_bytes(20240520, 1, 0, {}, 2));
  CHECK(et::data::read_tokens(none.path).numel() == 0);
}

TEST_CASE("token files: write_tokens writes the format's bytes (uint16 when every token fits)", "[data][tokens]") {
  const std::string path = test::temporary_path("written.bin");
  et::data::write_tokens(path, et::from_vector(et::cpu, std::vector<std::int64_t>{3, 65535, 0}, {3}));
  CHECK(test::read_bytes(path) == token_bytes(20240520, 1, 3, {3, 65535, 0}, 2));
  et::data::write_tokens(path, et::from_vector(et::cpu, std::vector<std::int32_t>{65536, 2}, {2}));
  CHECK(test::read_bytes(path) == token_bytes(20240801, 1, 2, {65536, 2}, 4));
  CHECK(et::data::read_tokens(path).to_vector() == std::vector<std::int64_t>{65536, 2});
  CHECK_THROWS_WITH(et::data::write_tokens(path, et::from_vector(et::cpu, std::vector<std::int64_t>{1, -2}, {2})),
                    Contains("et: write_tokens: " + path + ": token 1 is -2, outside [0, 2^32)"));
  CHECK_THROWS_WITH(et::data::write_tokens(path, et::from_vector(et::cpu, std::vector<std::int64_t>{1ll << 32}, {1})),
                    Contains("token 0 is 4294967296, outside [0, 2^32)"));
  CHECK(et::data::read_tokens(path).to_vector() == std::vector<std::int64_t>{65536, 2});  // left as it was
  std::remove(path.c_str());
}

TEST_CASE("token files: broken files are et::Errors naming the file and the fault", "[data][tokens][errors]") {
  auto fails = [](const Bytes& bytes, const std::string& message) {
    const TempFile file("bad.bin", bytes);
    INFO(message);
    CHECK_THROWS_WITH(et::data::read_tokens(file.path), Contains("et: read_tokens: " + file.path) && Contains(message));
  };
  fails({}, "not a token file: 0 bytes, shorter than its 1024-byte header");
  fails(Bytes(1023, 0), "not a token file: 1023 bytes");
  fails(token_bytes(20240521, 1, 0, {}, 2), "its magic number is 20240521, not 20240520 (uint16 tokens) or 20240801");
  fails(token_bytes(20240520, 2, 0, {}, 2), "version 2; read_tokens reads version 1");
  fails(token_bytes(20240520, 1, 0x80000000u, {}, 2), "a negative token count, -2147483648");
  fails(token_bytes(20240520, 1, 3, {1, 2}, 2),
        "its header gives 3 tokens of 2 bytes (6 bytes), the file holds 4 bytes after its header");
  fails(token_bytes(20240520, 1, 1, {1, 2}, 2), "its header gives 1 tokens of 2 bytes (2 bytes), the file holds 4 bytes");
  fails(token_bytes(20240801, 1, 2, {1, 2}, 2), "its header gives 2 tokens of 4 bytes (8 bytes), the file holds 4 bytes");
  // A count that claims the most tokens a header can: refused from the file's size.
  fails(token_bytes(20240801, 1, 0x7FFFFFFFu, {1}, 4), "its header gives 2147483647 tokens of 4 bytes");

  const std::string missing = test::temporary_path("missing.bin");
  CHECK_THROWS_WITH(et::data::read_tokens(missing), Contains(missing) && Contains("cannot open it"));
  const std::string directory = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(et::data::read_tokens(directory), Contains("a directory, not a file"));
  const TempFile real("real.bin", token_bytes(20240520, 1, 1, {9}, 2));
  CHECK_THROWS_WITH(et::data::read_tokens(real.path + std::string(1, '\0') + "x"), Contains("holds a NUL byte"));
  CHECK_THROWS_WITH(et::data::write_tokens(real.path + std::string(1, '\0'), et::zeros<std::int64_t>(et::cpu, {1})),
                    Contains("holds a NUL byte"));
  CHECK(et::data::read_tokens(real.path).to_vector() == std::vector<std::int64_t>{9});
}
TEST_CASE("ByteTokenizer: a token a byte, decode(encode(t)) == t, tokens outside [0, 256) refused", "[data][tokens]") {
  using et::data::ByteTokenizer;
  // UTF-8 (e with an acute accent: two bytes), a NUL and the byte 0xff: every byte a token.
  const std::string text = std::string("In the beginning God created the heaven and the earth.\n\xc3\xa9") +
                           std::string(1, '\0') + "\xff";
  const auto tokens = ByteTokenizer::encode(text);
  REQUIRE(tokens.numel() == static_cast<std::int64_t>(text.size()));
  CHECK(tokens.data()[0] == 'I');
  const std::int64_t n = tokens.numel();
  CHECK(std::vector<std::int64_t>(tokens.data() + n - 4, tokens.data() + n) == std::vector<std::int64_t>{0xc3, 0xa9, 0, 0xff});
  CHECK(ByteTokenizer::decode(tokens) == text);
  CHECK(ByteTokenizer::decode(ByteTokenizer::encode("")).empty());
  CHECK(ByteTokenizer::vocab_size == 256);
  const auto bad = et::from_vector(et::Cpu{}, std::vector<std::int64_t>{65, 256}, {2});
  CHECK_THROWS_WITH(ByteTokenizer::decode(bad), Contains("token 1 is 256, outside [0, 256)"));
  CHECK_THROWS_WITH(ByteTokenizer::decode(et::from_vector(et::Cpu{}, std::vector<int>{-1}, {1})),
                    Contains("token 0 is -1"));
}
