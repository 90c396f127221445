// oneDNN (Intel's library of deep-learning primitives) under the CPU's float convolutions
// and pooling (dnnl_conv.hpp, dnnl_pool.hpp), when etensor is built with it (ET_WITH_DNNL,
// set by CMake when it finds oneDNN; without it only the counters below exist and
// backend/cpu/nn.hpp runs conv.hpp and pool.hpp). This file holds what both share:
//
//  - One CPU engine and one stream for the process (function-local statics, so made once
//    and thread-safely). A CPU stream holds no state of its own and runs each primitive
//    synchronously on the calling thread's OpenMP team, so every thread can share it; that
//    team is omp_get_max_threads() wide, so et::set_num_threads governs oneDNN as it does
//    the rest of the CPU work, and no other pool starts.
//  - No primitive cache of ours: each call describes its problem and takes the primitive
//    from oneDNN's own cache (1024 primitives, least recently used out). A configuration's
//    first call JIT-compiles it (0.15 ms a primitive on average); later ones cost about
//    8 us a pass more than conv.hpp's on a tiny convolution, 4 us a pooling.
//  - Scratchpads are the caller's (scratchpad_mode::user), allocated per call: a primitive
//    taken from the cache may then run on any thread, on two at once too, which oneDNN's
//    default shared scratchpad does not allow.
//  - A failed oneDNN call throws et::Error naming the operation and oneDNN's status. A
//    problem oneDNN has no implementation for, or only its reference loops (hundreds of
//    times slower than im2col), is declined instead: the caller's own kernels run it.
//  - Not in CUDA files: nvcc 13 in C++20 stops with an internal error of its front end
//    ("assertion failed ... find_allocated_name_reference") on <oneapi/dnnl/dnnl.hpp>
//    itself, so there ET_DNNL_PRIMITIVES stays undefined and the CPU's convolutions and
//    pooling take conv.hpp and pool.hpp (matrix products still take oneDNN's C API: gemm.hpp).
#pragma once

#if defined(ET_WITH_DNNL) && !defined(__CUDACC__)
#define ET_DNNL_PRIMITIVES 1
#endif

#include <atomic>
#include <cstdint>

namespace et::detail {

/// Operations the CPU ran through oneDNN (a convolution pass or a pooling pass, each
/// counted once, whatever reorders it took), so that tests can tell which path ran. They
/// stay 0 in a build without oneDNN, in CUDA files, and for double, which never goes there.
struct DnnlCounters {
  std::atomic<std::int64_t> convolutions{0};  ///< forward, backward-data and backward-filter passes
  std::atomic<std::int64_t> poolings{0};      ///< max and average, forward and backward passes
};

inline DnnlCounters& dnnl_counters() {
  static DnnlCounters counters;
  return counters;
}

}  // namespace et::detail

#if defined(ET_DNNL_PRIMITIVES)

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_debug.h>

#include <climits>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "et/backend/nn_shapes.hpp"
#include "et/runtime/allocator.hpp"
#include "et/runtime/error.hpp"

namespace et::detail::cpu_backend::dnnl {

using ::dnnl::memory;
using tag = ::dnnl::memory::format_tag;

struct Runtime {
  ::dnnl::engine engine{::dnnl::engine::kind::cpu, 0};
  ::dnnl::stream stream{engine};
};

inline Runtime& runtime() {
  static Runtime r;
  return r;
}

/// f() (which says whether it ran the operation), with a oneDNN failure rethrown as
/// et::Error naming `operation` and oneDNN's status.
template <class F>
bool guarded(const char* operation, F&& f) {
  try {
    return f();
  } catch (const ::dnnl::error& e) {
    throw Error(std::string("et: oneDNN ") + operation + " failed: " + dnnl_status2str(e.status) + " (" + e.what() +
                ")");
  }
}

/// Whether every extent and element count fits oneDNN's kernels, which check shapes in int
/// and index some buffers with 32-bit offsets.
inline bool fits_int32(std::initializer_list<std::int64_t> values) {
  for (const std::int64_t v : values)
    if (v < 0 || v > INT_MAX) return false;
  return true;
}

/// Attributes of every primitive here: the scratchpad is the caller's.
inline ::dnnl::primitive_attr user_scratchpad() {
  ::dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(::dnnl::scratchpad_mode::user);
  return attr;
}

/// Whether a primitive descriptor came out empty (no implementation) or as oneDNN's
/// reference loops ("ref:any"; about 300x slower than conv.hpp's im2col on CIFAR-net
/// convolutions).
inline bool unusable(const ::dnnl::primitive_desc_base& pd) {
  return !pd || std::string_view(pd.impl_info_str()).substr(0, 3) == "ref";
}

/// An activation [N, C, H, W] (logical order) stored in `layout`'s axis order, packed.
inline memory::desc activation_desc(Layout layout, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return {{n, c, h, w}, memory::data_type::f32, layout == Layout::nhwc ? tag::nhwc : tag::nchw};
}

/// The same extents in whatever format a primitive prefers (format_tag::any).
inline memory::desc any_format(const memory::desc& d) { return {d.dims(), memory::data_type::f32, tag::any}; }

/// oneDNN memory of descriptor `d` on a block of etensor's host allocator (whose cache keeps
/// large blocks: memory oneDNN allocated itself came fresh from the system each call, and
/// ResNet-56's CPU step spent a quarter of its time in the kernel zeroing those pages).
/// `keep` holds the block until the primitive has run.
inline memory cached_memory(const memory::desc& d, std::vector<std::shared_ptr<void>>& keep) {
  keep.push_back(allocate_host(d.get_size()));
  return memory(d, runtime().engine, keep.back().get());
}

/// Runs `p` (its arguments in `args`) on the shared stream, with a scratchpad of its own.
inline void execute(const ::dnnl::primitive& p, const ::dnnl::primitive_desc_base& pd,
                    std::unordered_map<int, memory> args) {
  const memory::desc scratchpad = pd.scratchpad_desc();
  std::vector<std::shared_ptr<void>> keep;
  if (scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, cached_memory(scratchpad, keep));
  p.execute(runtime().stream, args);
  runtime().stream.wait();
}

/// Copies `from` into `to`, whose formats differ.
inline void reorder(const memory& from, const memory& to) {
  const ::dnnl::reorder::primitive_desc pd(from, to, user_scratchpad());
  execute(::dnnl::reorder(pd), pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

/// One primitive's arguments: our packed buffers as oneDNN memory, reordered into the
/// formats the primitive chose (inputs, now) or out of them (outputs, after it runs) where
/// those differ from ours.
class Arguments {
 public:
  /// An input in our format `ours`, read through `data`; `wanted`: the primitive's.
  void input(int arg, const memory::desc& ours, const float* data, const memory::desc& wanted) {
    // oneDNN's memory takes a non-const handle; an input's is only read.
    const memory user(ours, runtime().engine, const_cast<float*>(data));
    if (wanted == ours) {
      args_.emplace(arg, user);
      return;
    }
    const memory theirs = cached_memory(wanted, blocks_);
    reorder(user, theirs);
    args_.emplace(arg, theirs);
  }

  /// An output in our format `ours`, written through `data`.
  void output(int arg, const memory::desc& ours, float* data, const memory::desc& wanted) {
    const memory user(ours, runtime().engine, data);
    if (wanted == ours) {
      args_.emplace(arg, user);
      return;
    }
    const memory theirs = cached_memory(wanted, blocks_);
    args_.emplace(arg, theirs);
    results_.emplace_back(theirs, user);
  }

  /// Memory in the primitive's own format that two primitives pass along (max pooling's
  /// workspace), already made.
  void pass(int arg, const memory& m) { args_.emplace(arg, m); }

  /// Runs `p` and reorders its outputs into our buffers.
  void run(const ::dnnl::primitive& p, const ::dnnl::primitive_desc_base& pd) {
    execute(p, pd, args_);
    for (const auto& [theirs, user] : results_) reorder(theirs, user);
  }

 private:
  std::vector<std::shared_ptr<void>> blocks_;        // the reordered buffers' storage
  std::unordered_map<int, memory> args_;
  std::vector<std::pair<memory, memory>> results_;  // (the primitive's output, our buffer)
};

}  // namespace et::detail::cpu_backend::dnnl

#endif  // ET_DNNL_PRIMITIVES
