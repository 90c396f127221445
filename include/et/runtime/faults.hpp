// Fault injection for tests: make the N-th allocation fail, as a full device would.
//
//   for (std::int64_t n = 1;; ++n) {
//     et::testing::FailAllocation fail(n);   // on this thread, the n-th allocation from now
//     try { step(); } catch (const et::OutOfMemory&) { /* check the state, retry */ continue; }
//     if (!fail.failed()) break;              // step() made fewer than n allocations
//   }
//
// Every allocation etensor makes for storage goes through the hook (runtime/allocator.hpp:
// CPU and CUDA; runtime/pinned.hpp: pinned host memory), tensors and internal buffers
// alike (temporaries of an expression, reduction scratch, GEMM and convolution
// workspaces). A failing one throws et::OutOfMemory before anything is allocated, so the
// code that called it unwinds exactly as it would on a full device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "et/runtime/error.hpp"

namespace et {

namespace detail {

/// This thread's injection state: allocations counted since the armed FailAllocation was
/// made, and the one to fail (0: none armed).
struct AllocationFaults {
  std::int64_t seen = 0;
  std::int64_t fail_at = 0;
  bool failed = false;
};

inline AllocationFaults& allocation_faults() noexcept {
  thread_local AllocationFaults faults;
  return faults;
}

/// Called by every allocator before it allocates: throws et::OutOfMemory when this is the
/// allocation a FailAllocation on this thread chose. `device_name()` names the device.
template <class Name>
void check_injected_fault(std::size_t bytes, Name&& device_name) {
  AllocationFaults& faults = allocation_faults();
  if (faults.fail_at == 0) return;
  if (++faults.seen != faults.fail_at) return;
  faults.failed = true;
  throw OutOfMemory(std::string(device_name()), bytes, 0, 0,
                    "allocation " + std::to_string(faults.seen) + " failed on purpose: et::testing::FailAllocation");
}

}  // namespace detail

namespace testing {

/// While it lives, the `nth` allocation (1 = the next one) that etensor makes on this
/// thread throws et::OutOfMemory; the others succeed. Not nestable.
class FailAllocation {
 public:
  explicit FailAllocation(std::int64_t nth) {
    if (nth < 1) throw Error("et::testing::FailAllocation: the allocation to fail is counted from 1, got " +
                             std::to_string(nth));
    detail::AllocationFaults& faults = detail::allocation_faults();
    if (faults.fail_at != 0) throw Error("et::testing::FailAllocation: one is already active on this thread");
    faults = {0, nth, false};
  }
  FailAllocation(const FailAllocation&) = delete;
  FailAllocation& operator=(const FailAllocation&) = delete;
  ~FailAllocation() { detail::allocation_faults() = {}; }

  /// The allocations made on this thread since construction (the failed one included).
  std::int64_t allocations() const noexcept { return detail::allocation_faults().seen; }
  /// Whether the chosen allocation was reached (and failed).
  bool failed() const noexcept { return detail::allocation_faults().failed; }
};

}  // namespace testing
}  // namespace et
