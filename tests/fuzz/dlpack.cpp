// libFuzzer target: DLPack capsules (et::from_dlpack: dtype, rank, device, shape, strides,
// byte_offset and the pointer, all read from the input). Any input is an et::Error that
// leaves the capsule with its producer (its deleter not called), or a tensor over the
// capsule's memory that calls the deleter once when it goes; where the layout lies inside
// this target's buffer its elements are summed, so that a reach the checks got wrong reads
// outside the buffer (AddressSanitizer's report).
#include <et/core.hpp>
#include <et/interop/dlpack.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

/// The input read field by field; past its end, zeros.
struct Reader {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  template <class T>
  T next() {
    T value{};
    const std::size_t n = at < size ? std::min(sizeof(T), size - at) : 0;
    if (n > 0) std::memcpy(&value, data + at, n);
    at += sizeof(T);
    return value;
  }
};

alignas(64) unsigned char buffer[4096];
int deleted = 0;

template <class T, int R>
void adopt(DLManagedTensor& managed) {
  const DLTensor& dl = managed.dl_tensor;
  deleted = 0;
  try {
    {
      const auto t = et::from_dlpack<T, R>(et::cpu, &managed);
      // The reach, computed apart from the library's checks (which bounded it within int64).
      const auto begin = reinterpret_cast<std::uintptr_t>(t.data());
      std::uint64_t last = 0;
      bool empty = false;
      for (int d = 0; d < R; ++d) {
        empty = empty || t.size(d) == 0;
        last += std::uint64_t(t.size(d) > 0 ? t.size(d) - 1 : 0) * std::uint64_t(t.strides()[d]);
      }
      // (a null data pointer stays null whatever byte_offset says)
      const auto expected = dl.data ? reinterpret_cast<std::uintptr_t>(dl.data) + dl.byte_offset : 0;
      if (begin != expected) std::abort();
      const auto lo = reinterpret_cast<std::uintptr_t>(buffer);
      // (and few enough elements to read: stride-0 axes reach few bytes with many elements)
      if (!empty && t.numel() <= 4096 && begin >= lo && last < sizeof buffer / sizeof(T) &&
          begin + (last + 1) * sizeof(T) <= lo + sizeof buffer) {
        if constexpr (std::is_same_v<T, bool>) (void)t.to_vector();
        else (void)et::sum(et::cast<double>(t)).item();
      }
      if (deleted != 0) std::abort();
    }
    if (deleted != 1) std::abort();
  } catch (const et::Error&) {
    if (deleted != 0) std::abort();  // a refused capsule stays its producer's
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in{data, size};
  const auto which = in.next<std::uint8_t>();
  std::int64_t shape[8], strides[8];
  DLManagedTensor managed{};
  DLTensor& dl = managed.dl_tensor;
  dl.dtype.code = in.next<std::uint8_t>();
  dl.dtype.bits = in.next<std::uint8_t>();
  dl.dtype.lanes = in.next<std::uint16_t>();
  const auto device_type = in.next<std::int32_t>();
  std::memcpy(&dl.device.device_type, &device_type, sizeof device_type);  // any value, as a producer may send
  dl.device.device_id = in.next<std::int32_t>();
  dl.ndim = in.next<std::int32_t>();
  dl.byte_offset = in.next<std::uint64_t>();
  dl.data = buffer + in.next<std::uint16_t>() % sizeof buffer;
  const auto flags = in.next<std::uint8_t>();
  for (auto& e : shape) e = in.next<std::int64_t>();
  for (auto& e : strides) e = in.next<std::int64_t>();
  dl.shape = flags & 1 ? nullptr : shape;
  dl.strides = flags & 2 ? nullptr : strides;
  if (flags & 4) dl.data = nullptr;
  managed.deleter = [](DLManagedTensor*) { ++deleted; };
  switch (which % 6) {
    case 0: adopt<float, 2>(managed); break;
    case 1: adopt<double, 0>(managed); break;
    case 2: adopt<std::int64_t, 3>(managed); break;
    case 3: adopt<std::uint8_t, 1>(managed); break;
    case 4: adopt<bool, 4>(managed); break;
    default: adopt<et::half, 5>(managed); break;
  }
  return 0;
}
