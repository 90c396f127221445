// Mixed precision, the forward's side: et::amp::Autocast<L>, the scope in which float
// modules (Linear, Conv2d, BatchNorm2d) take activations of a 16-bit type L (et::bfloat16
// or et::half) and compute in L, with float parameters (master weights) that each have ONE
// cast copy in L per scope and version:
//
//   {
//     et::amp::Autocast<et::bfloat16> autocast;
//     auto logits = model(et::cast<et::bfloat16>(x));      // every layer computes in bf16
//     loss = et::nn::cross_entropy(logits, labels);        // a float loss
//   }
//   loss.backward();                                        // float gradients of the float weights
//
// PyTorch decides at run time, op by op, which type each op computes in (its autocast op
// lists). etensor decides by types, at compile time, and follows the same lists:
//   computes in the activations' type L   matmul, linear, conv2d (cuBLASLt / cuDNN, float
//                                          accumulation), max/avg pooling, elementwise code
//   computes in float                      cross_entropy and mse_loss of L tensors (their
//                                          results are float), batch-norm statistics and the
//                                          running statistics (float), softmax, log_softmax
//                                          and logsumexp rows (float or double inside, the
//                                          result rounded once), reductions (float inside),
//                                          the optimizers (float master weights)
// so a 16-bit activation stays 16-bit through a network. Float activations are cast as
// PyTorch's autocast casts them: a float Linear, Conv2d or LSTM given float activations
// under the guard casts them to L, computes in L (its weights' cached copies) and returns its
// L result as float (one cast each way, per call), and et::matmul of float operands built
// under the guard computes with its inputs rounded to L (the guard sets the math mode to
// MathMode::bf16 or f16, backend/math_mode.hpp; a MathModeGuard inside it overrides that).
// The fast path is one explicit cast of the input, model(et::eval(et::cast<L>(x))): every
// layer after it receives L activations. What the guard adds at run time:
//  - permission: a float module given an L activation outside a guard of L throws et::Error
//    (as PyTorch refuses a bfloat16 input to a float layer outside autocast);
//  - the cast cache: a weight's copy in L is made once per guard scope (the outermost) and
//    per version of the weight, so a weight read by several calls is cast once per step;
//    the copy records for autograd, so the float weight's gradient is the sum of what
//    reaches the copy. The cache is emptied when the outermost guard closes, as PyTorch's.
// Autocast<L>(false) turns mixing off for a nested scope (and restores the math mode of
// before the outermost guard). Guards are per thread.
#pragma once

#include <algorithm>
#include <any>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "et/autograd/graph.hpp"
#include "et/backend/math_mode.hpp"
#include "et/half.hpp"
#include "et/runtime/error.hpp"
#include "et/runtime/memory.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"

namespace et::amp {

namespace detail {

/// The 16-bit type mixing is allowed for: none, bfloat16 or half.
enum class Low { none, bfloat16, float16 };

template <class L>
inline constexpr Low low_of = std::is_same_v<L, bfloat16> ? Low::bfloat16 : Low::float16;

inline const char* low_name(Low low) {
  return low == Low::bfloat16 ? "et::bfloat16" : low == Low::float16 ? "et::half" : "none";
}

/// One cast copy: the float tensor it was made from (its storage, watched without keeping
/// it alive; data, layout, version, and whether the cast records for autograd), and the copy.
/// The storage is compared by ownership, not address: a weight freed inside the scope may
/// hand its block (and the address of its storage) to the next weight, whose version counter
/// starts where the old one's did, and only the expired owner tells the two apart.
struct CastEntry {
  std::weak_ptr<void> storage;
  const void* data;
  std::vector<std::int64_t> layout;  ///< shape, then strides
  std::uint64_t version;
  bool recorded;
  std::any copy;
};

struct AutocastState {
  Low low = Low::none;
  int depth = 0;  ///< guards open on this thread
  MathMode outside = MathMode::exact;  ///< the math mode when the outermost guard opened
  std::vector<CastEntry> cache;
  std::uint64_t casts = 0;  ///< copies made, ever (tests read it)
};

inline AutocastState& state() noexcept {
  thread_local AutocastState s;
  return s;
}

template <class T, int R, class D>
std::vector<std::int64_t> layout_key(const Tensor<T, R, D>& t) {
  std::vector<std::int64_t> key(t.shape().begin(), t.shape().end());
  key.insert(key.end(), t.strides().begin(), t.strides().end());
  return key;
}

/// Throws et::Error unless the calling thread's guard allows float parameters to meet
/// activations of type L; `module` names the caller.
template <class L>
void require_mixing(const char* module) {
  const Low low = state().low;
  if (low == low_of<L>) return;
  const std::string input = low_name(low_of<L>);
  if (low == Low::none)
    throw Error(std::string("et: ") + module + "<float> given " + input +
                " activations outside et::amp::Autocast<" + input +
                ">: open the guard around the forward pass, or cast the input to float");
  throw Error(std::string("et: ") + module + "<float> given " + input + " activations inside et::amp::Autocast<" +
              low_name(low) + ">: cast the input to " + low_name(low));
}

}  // namespace detail

/// The guard (see the file comment): L is et::bfloat16 or et::half; `enabled = false`
/// turns mixing off inside an enclosing guard. Not copyable; nests.
template <class L>
class Autocast {
  static_assert(et::detail::is_16bit_float_v<L>,
                "et: et::amp::Autocast<L> computes in et::bfloat16 or et::half; L is neither");

 public:
  explicit Autocast(bool enabled = true) : previous_(detail::state().low), previous_mode_(math_mode()) {
    detail::AutocastState& s = detail::state();
    if (s.depth++ == 0) s.outside = previous_mode_;
    s.low = enabled ? detail::low_of<L> : detail::Low::none;
    et::detail::thread_math_mode() =
        enabled ? (std::is_same_v<L, bfloat16> ? MathMode::bf16 : MathMode::f16) : s.outside;
  }
  ~Autocast() {
    detail::AutocastState& s = detail::state();
    s.low = previous_;
    et::detail::thread_math_mode() = previous_mode_;
    if (--s.depth == 0) s.cache.clear();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  detail::Low previous_;
  MathMode previous_mode_;
};

/// True while a guard of the calling thread allows mixing with L (L = bfloat16 or half).
template <class L>
bool autocast_enabled() noexcept {
  return detail::state().low == detail::low_of<L>;
}

/// How many cast copies of parameters the calling thread has made so far (each cache miss
/// is one): what tests and benchmarks read to see that a weight is cast once per step.
inline std::uint64_t cast_copies() noexcept { return detail::state().casts; }

/// The copy in L of a float parameter under the calling thread's guard: made once per
/// guard scope and version of `weight` (one cast kernel), recorded for autograd when
/// `weight` records. `module` names the caller for the error a missing guard gets.
template <class L, int R, class D>
Tensor<L, R, D> low_copy(const Tensor<float, R, D>& weight, const char* module) {
  detail::require_mixing<L>(module);
  detail::AutocastState& s = detail::state();
  const et::detail::VersionCounter* counter = et::detail::storage_version(weight.storage());
  const std::uint64_t version = counter ? counter->value.load(std::memory_order_relaxed) : 0;
  const bool recorded = et::detail::records(weight);
  const std::vector<std::int64_t> layout = detail::layout_key(weight);
  // Copies of weights that no longer exist go first: nothing can ask for them again.
  std::erase_if(s.cache, [](const detail::CastEntry& entry) { return entry.storage.expired(); });
  for (auto entry = s.cache.begin(); entry != s.cache.end(); ++entry) {
    if (entry->storage.lock() != weight.storage() || entry->data != weight.data() || entry->layout != layout ||
        entry->recorded != recorded)
      continue;
    if (entry->version == version) return std::any_cast<Tensor<L, R, D>>(entry->copy);
    s.cache.erase(entry);  // a stale copy: the weight was written since
    break;
  }
  Tensor<L, R, D> copy = cast<L>(weight);
  ++s.casts;
  s.cache.push_back({weight.storage(), weight.data(), layout, version, recorded, copy});
  return copy;
}

}  // namespace et::amp
