// libFuzzer target: safetensors files (et::io::read_safetensors: the 8-byte length, the JSON
// header, dtypes, shapes and offsets against the data). Any input is an et::Error or a file
// that writes back to bytes which read back to the same tensors; anything else (another
// exception, a sanitizer report) is a finding.
#include "fuzz_file.hpp"

#include <et/io/safetensors.hpp>

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file;
  et::io::SafeTensorsFile parsed;
  try {
    parsed = et::io::read_safetensors(file.hold(data, size));
  } catch (const et::Error&) {
    return 0;
  }
  const std::vector<unsigned char> again = et::io::serialize_safetensors(parsed);
  const et::io::SafeTensorsFile reread = et::io::parse_safetensors(again, "the rewritten file");
  if (reread.metadata != parsed.metadata || reread.tensors.size() != parsed.tensors.size()) std::abort();
  for (const auto& [name, tensor] : parsed.tensors) {
    const auto& other = reread.tensors.at(name);
    if (other.dtype != tensor.dtype || other.shape != tensor.shape || other.bytes != tensor.bytes) std::abort();
  }
  return 0;
}
