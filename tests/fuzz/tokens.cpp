// libFuzzer target: token files (et::data::read_tokens: llm.c's 1024-byte header, the magic
// choosing uint16 or uint32 tokens, the count against the file's size). Any input is an
// et::Error or tokens that write back to the same bytes where the header's reserved words
// are zero (write_tokens picks the narrowest width, so a uint32 file of small tokens differs).
#include "fuzz_file.hpp"

#include <et/data/tokens.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file;
  et::Tensor<std::int64_t, 1, et::Cpu> tokens;
  try {
    tokens = et::data::read_tokens(file.hold(data, size));
  } catch (const et::Error&) {
    return 0;
  }
  std::int32_t magic = 0;
  std::memcpy(&magic, data, 4);
  const std::size_t width = magic == 20240520 ? 2 : 4;
  if (size != 1024 + std::size_t(tokens.numel()) * width) std::abort();
  for (std::int64_t i = 0; i < tokens.numel(); ++i) {
    std::uint64_t v = 0;
    std::memcpy(&v, data + 1024 + std::size_t(i) * width, width);
    if (std::int64_t(v) != tokens.data()[i]) std::abort();
  }
  return 0;
}
