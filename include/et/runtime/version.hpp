// The version of a storage's data: a count of the in-place writes into it, kept in the
// storage's deleter (std::get_deleter finds it), so it is shared by every tensor over that
// storage however it was made: copies, views, detach(), handles with or without autograd
// state. A recorded operation notes the version of each tensor it saves and its backward
// checks it (autograd/graph.hpp's SavedVersion), so a write through any handle is seen.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace et::detail {

struct VersionCounter {
  std::atomic<std::uint64_t> value{0};

  VersionCounter() = default;
  // Deleters are copied into the shared_ptr's control block as it is made.
  VersionCounter(const VersionCounter& other) noexcept : value(other.value.load(std::memory_order_relaxed)) {}
  VersionCounter& operator=(const VersionCounter&) = delete;
};

/// The deleter of storage etensor did not allocate (from_blob, from_dlpack): the owner's
/// release, and the data's version.
struct ForeignBlock {
  std::function<void(void*)> release;
  VersionCounter version;
  void operator()(void* p) const { release(p); }
};

}  // namespace et::detail
