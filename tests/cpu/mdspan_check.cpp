// et::as_mdspan on the CPU, a test of its own so that where no mdspan exists (neither
// std::mdspan nor the CUDA toolkit's cuda::std::mdspan) it is reported as skipped (exit
// 77) rather than passed: every element of transposed, sliced, empty and rank-3 views read
// through the view against the tensor's own indexing, a write through it, and a broadcast
// view refused. tests/gpu/test_interop.cu reads views in a kernel.
#include <et/et.hpp>
#include <et/interop/mdspan.hpp>

#include <cstdint>
#include <cstdio>

#if defined(ET_HAS_MDSPAN)
namespace {
int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() {
  const auto t = et::eval(et::arange<float>(et::cpu, 60).reshape({3, 4, 5}));
  const auto view = t.transpose(0, 2).slice(1, 1, 4, 2);  // [5, 2, 3], strided
  const auto v = et::as_mdspan(view);
  check(v.extent(0) == 5 && v.extent(1) == 2 && v.extent(2) == 3, "extents");
  const auto dense = view.contiguous().to_vector();
  bool same = true;
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t j = 0; j < 2; ++j)
      for (std::int64_t k = 0; k < 3; ++k) same = same && v(i, j, k) == dense[static_cast<std::size_t>((i * 2 + j) * 3 + k)];
  check(same, "every element of a transposed, sliced view");
  const auto m = et::as_mdspan(t.select(0, 1));  // [4, 5]
  m(2, 3) = -1.0f;
  check(t.data()[20 + 2 * 5 + 3] == -1.0f, "a write through the view lands in the tensor");
  check(et::as_mdspan(et::zeros<double>(et::cpu, {0, 3})).size() == 0, "an empty tensor");
  bool refused = false;
  try {
    et::as_mdspan(et::zeros<float>(et::cpu, {1, 4}).expand({3, 4}));
  } catch (const et::Error&) {
    refused = true;
  }
  check(refused, "a broadcast view is refused");
  std::printf("as_mdspan (%s): %s\n", ET_HAS_MDSPAN == 1 ? "std::mdspan" : "cuda::std::mdspan",
              failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
#else
int main() {
  std::printf("SKIPPED: no std::mdspan and no cuda::std::mdspan (CUDA toolkit) here\n");
  return 77;
}
#endif
