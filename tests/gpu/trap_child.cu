// The trap test's child process (trap_child.hpp): main() runs it when the variable is set.
// Its own file, so that every executable built from gpu/main.cpp links it (the DataParallel
// tests too, which do not compile test_faults.cu, the trap test itself).
#include "../common/random_values.hpp"
#include "trap_child.hpp"

#include <et/et.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

/// Traps when a value is negative (the user's check that its input is a probability, say).
__global__ void trap_on_negative(const float* values, std::int64_t n) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && values[i] < 0.0f) __trap();
}

/// A trapped kernel's error: cudaErrorLaunchFailure on the lent H100 (2026-11-27); the
/// other two are what other drivers, and a device-side assert(), report.
bool names_a_kernel_fault(int code) {
  return code == cudaErrorLaunchFailure || code == cudaErrorIllegalInstruction || code == cudaErrorAssert;
}

}  // namespace

/// The child process of the trap test (test_faults.cu). A failed expectation prints a
/// "trap-child: FAILED" line and makes the exit status 1.
int test::trap_child_main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a pipe: what was printed reaches the parent even if this hangs
  bool ok = true;
  const auto expect = [&](bool holds, const std::string& what) {
    if (!holds) std::printf("trap-child: FAILED: %s\n", what.c_str()), ok = false;
  };
  const std::vector<float> host = test::random_values<float>(4096, 11);  // about half negative
  const auto x = et::from_vector(et::cuda<0>, host);
  const float sum_before = et::sum(x).item();  // the context works before the trap
  double expected = 0;
  for (const float v : host) expected += v;
  expect(std::fabs(sum_before - expected) <= 1e-4 * (1 + std::fabs(expected)), "the sum before the trap");

  trap_on_negative<<<16, 256, 0, et::current_stream(et::cuda<0>).native()>>>(x.data(), x.numel());

  // The next etensor call that reaches the device: a fused expression and its sum. Its
  // launch, its allocation or its wait reports the trap, whichever comes first.
  int code = 0;
  try {
    const et::Tensor<float, 1, et::Cuda<0>> y = et::exp(x) * 2.0f + 1.0f;
    const float total = et::sum(y).item();
    expect(false, "the work queued after a trapped kernel finished, total " + std::to_string(total));
  } catch (const et::CudaError& e) {
    const std::string message = e.what();
    std::printf("trap-child: first error: et::CudaError: %s\n", message.c_str());
    code = e.code();
    expect(names_a_kernel_fault(code), "the first error names a kernel fault: " + message);
    expect(message.find("et: CUDA call") != std::string::npos &&
               message.find(cudaGetErrorName(static_cast<cudaError_t>(code))) != std::string::npos,
           "the first error's message names the call and the error: " + message);
  }
  if (code == 0) return 1;

  // The error is sticky: every later call that reaches the driver fails the same way, with
  // et::CudaError, never a crash or another exception type (those end this process).
  const auto fails_again = [&](const char* what, auto&& call) {
    try {
      call();
      expect(false, std::string(what) + " succeeded after the trap");
    } catch (const et::CudaError& e) {
      std::printf("trap-child: %s: et::CudaError: %s\n", what, e.what());
      expect(e.code() == code, std::string(what) + " reports the trap's error code");
    }
  };
  fails_again("synchronize", [] { et::synchronize(et::cuda<0>); });
  fails_again("to_vector", [&] { (void)x.to_vector(); });
  fails_again("a fused expression", [&] {
    const et::Tensor<float, 1, et::Cuda<0>> y = x * 3.0f - 1.0f;
    et::synchronize(et::cuda<0>);
  });
  fails_again("a reduction's item()", [&] { (void)et::max(x).item(); });
  fails_again("a copy to the GPU", [&] { (void)et::from_vector(et::cuda<0>, host); });
  fails_again("ones on the GPU", [] { (void)et::ones<float>(et::cuda<0>, {64}).to_vector(); });
  fails_again("a matrix product", [&] {
    const auto a = x.reshape(std::array<std::int64_t, 2>{64, 64});
    (void)et::eval(et::matmul(a, a)).to_vector();
  });
  // The tensors above are freed after the trap (their frees fail and say so on stderr).
  std::printf("trap-child: done\n");
  return ok ? 0 : 1;
}
