// How much precision a float32 matrix product may trade for speed on a GPU: et::MathMode,
// the calling thread's current mode, and the scope guard that changes it.
//
// The default is MathMode::exact: float32 products are computed in float32 (no TF32), as
// PyTorch does by default (torch.backends.cuda.matmul.allow_tf32 = False). The mode is a
// permission, not an order, and only float32 inputs on CUDA devices use it:
//   exact  float32 arithmetic throughout                  (cuBLAS CUBLAS_COMPUTE_32F)
//   tf32   inputs rounded to TF32 (10-bit mantissa) on tensor cores, float32 accumulation
//                                                         (CUBLAS_COMPUTE_32F_FAST_TF32)
//   bf16   inputs rounded to bfloat16 on tensor cores, float32 accumulation
//                                                         (CUBLAS_COMPUTE_32F_FAST_16BF)
//   f16    inputs rounded to half on tensor cores, float32 accumulation
//                                                         (CUBLAS_COMPUTE_32F_FAST_16F)
// double is always computed in double, and half or bfloat16 inputs always use tensor cores
// with float32 accumulation, whatever the mode. The CPU (Eigen) always computes exactly, as
// PyTorch's allow_tf32 leaves its CPU products alone.
#pragma once

namespace et {

/// The precision a float32 matrix product may use on a GPU (see the file comment).
enum class MathMode { exact, tf32, bf16, f16 };

namespace detail {
inline MathMode& thread_math_mode() noexcept {
  thread_local MathMode mode = MathMode::exact;
  return mode;
}
}  // namespace detail

/// The calling thread's current math mode: MathMode::exact unless a MathModeGuard of this
/// thread says otherwise. et::matmul reads it when the product is built (not when it runs).
inline MathMode math_mode() noexcept { return detail::thread_math_mode(); }

/// Sets the calling thread's math mode for the guard's lifetime, then restores the previous
/// one. Guards nest; other threads are not affected.
///
///   { et::MathModeGuard tf32(et::MathMode::tf32); y = et::matmul(x, w); }
class MathModeGuard {
 public:
  explicit MathModeGuard(MathMode mode) noexcept : previous_(detail::thread_math_mode()) {
    detail::thread_math_mode() = mode;
  }
  ~MathModeGuard() { detail::thread_math_mode() = previous_; }
  MathModeGuard(const MathModeGuard&) = delete;
  MathModeGuard& operator=(const MathModeGuard&) = delete;

 private:
  MathMode previous_;
};

}  // namespace et
