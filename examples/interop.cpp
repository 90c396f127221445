// Printing tensors and sharing memory with other code (docs/guide.md, section 17, whose
// code blocks are the regions marked [guide:...] here): operator<<, et::from_blob, Eigen
// views both ways, and a DLPack round trip. Runs on the first GPU when there is one, else
// on the CPU (the Eigen part always on the CPU); checks what it computes and returns
// nonzero if a check fails.
#include <et/et.hpp>

#include <Eigen/Core>

#include <cstdio>
#include <iostream>
#include <vector>

int main() {
  int failed = 0;
  auto check = [&](bool ok, const char* what) {
    std::printf("  %s %s\n", ok ? "ok    " : "FAILED", what);
    failed += ok ? 0 : 1;
  };
  et::try_gpu([&](auto dev) {
    std::printf("running on %s\n", et::device_name<decltype(dev)>.c_str());
    // [guide:print]
    auto m = et::eval(et::arange<float>(dev, 6).view({2, 3}) * 0.5f);
    std::cout << m << "\n";
    // tensor([[0.0000, 0.5000, 1.0000],
    //         [1.5000, 2.0000, 2.5000]], shape=[2, 3], dtype=float32, device=cuda:0)
    std::cout << et::to_string(et::arange<std::int64_t>(dev, 5000), {.edge_items = 2}) << "\n";
    // tensor([   0,    1, ..., 4998, 4999], shape=[5000], dtype=int64, device=cuda:0)
    // [guide:end]
    check(et::to_string(m.select(0, 1)).starts_with("tensor([1.5000, 2.0000, 2.5000], shape=[3]"), "printing");

    // [guide:dlpack]
    DLManagedTensor* shared = m.to_dlpack();           // for PyTorch, CuPy, JAX, ...: no copy
    auto back = et::from_dlpack<float, 2>(dev, shared);  // takes ownership of `shared`
    // [guide:end]
    check(back.data() == m.data(), "a DLPack round trip shares the storage");

    // [guide:from-blob]
    auto* memory = m.data();                              // memory some other code owns
    auto borrowed = et::from_blob(dev, memory, {3, 2});   // must outlive `borrowed`
    borrowed *= 2.0f;                                     // writes that memory
    // [guide:end]
    check(m.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5}, "from_blob writes through");
  });

  std::printf("Eigen\n");
  // [guide:eigen]
  auto t = et::eval(et::arange<double>(et::cpu, 6).view({2, 3}));
  et::as_eigen(t).col(0).setZero();            // an Eigen::Map with t's strides
  Eigen::MatrixXd a = Eigen::MatrixXd::Ones(2, 3);
  auto over_a = et::from_eigen(a);             // a Tensor<double, 2> over a's memory
  over_a += t;                                 // one fused loop, written into a
  // [guide:end]
  check(a(1, 2) == 6.0 && a(1, 0) == 1.0, "Eigen views both ways");

  std::printf("%s: %d check(s) failed\n", failed ? "FAILED" : "ok", failed);
  return failed ? 1 : 0;
}
