// The seeds' memory walk: allocate a 1000 x 1000 x 1000 float tensor (4 GB), look at what
// etensor holds (memory_stats) and what the driver reports free (as nvidia-smi shows it),
// free the tensor, and watch the memory come back: first to etensor's cache, then, after
// empty_cache, to the driver. On the CPU (CI) the same walk runs with a smaller tensor and
// the host has no cache: freed memory goes straight back.
//
//   memory_walk           1000^3 floats on a GPU, 100^3 on the CPU
//   memory_walk 200       200^3 floats
#include <et/et.hpp>

#include <cstdio>
#include <cstdlib>

namespace {

double mib(std::size_t bytes) { return double(bytes) / (1 << 20); }

template <et::Device D>
void show(D dev, const char* when) {
  const et::MemoryStats s = et::memory_stats(dev);
  std::printf("  %-26s allocated %9.1f MiB  reserved %9.1f MiB  peak %9.1f MiB  live blocks %zu", when, mib(s.allocated),
              mib(s.reserved), mib(s.peak_allocated), s.allocations);
  if constexpr (D::is_cuda) std::printf("  | driver: %9.1f MiB free", mib(et::memory_info(dev).free));
  std::printf("\n");
}

template <et::Device D>
int walk(D dev, std::int64_t side) {
  const std::size_t bytes = std::size_t(side) * side * side * sizeof(float);
  std::printf("memory walk on %s: a %lld^3 float tensor, %.1f MiB\n", et::device_name<D>.c_str(), (long long)side,
              mib(bytes));
  const et::MemoryStats start = et::memory_stats(dev);
  show(dev, "at the start");
  bool ok = true;
  {
    // [guide:memory]
    auto x = et::zeros<float>(dev, {side, side, side});
    show(dev, "holding x");
    ok = ok && et::memory_stats(dev).allocated == start.allocated + bytes;
  }  // x is freed: its block goes back to etensor's cache, not yet to the driver
  et::synchronize(dev);
  show(dev, "x freed");
  ok = ok && et::memory_stats(dev).allocated == start.allocated;
  ok = ok && et::memory_stats(dev).peak_allocated >= start.allocated + bytes;
  et::empty_cache(dev);  // hand the cache back
  show(dev, "after empty_cache");
  // [guide:end]
  const et::MemoryStats end = et::memory_stats(dev);
  ok = ok && end.reserved < start.allocated + bytes;
  std::printf("  %s\n", ok ? "ok: the memory came back" : "FAILED: the statistics do not add up");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t requested = argc > 1 ? std::atoll(argv[1]) : 0;
  if (requested < 0) {
    std::fprintf(stderr, "usage: memory_walk [side > 0]\n");
    return 2;
  }
  return et::try_gpu([&](auto dev) {
    const std::int64_t side = requested > 0 ? requested : decltype(dev)::is_cuda ? 1000 : 100;
    return walk(dev, side);
  });
}
