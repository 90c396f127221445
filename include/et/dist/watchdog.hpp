// The watch over a process group's pending work: each collective's end on its stream is
// marked by an event, and each host exchange through the bootstrap is counted. A thread
// looks every 50 ms; it calls the group's `stuck` with a message when
//   - a collective (or a host wait for the other ranks) did not complete within the
//     timeout (a rank never joined it), or
//   - a rank left or died (dist/peer_watch.hpp) and this rank still waits, 2 s later, for
//     a collective or an exchange that rank can no longer join.
// The group (dist/process_group.hpp) then aborts the communicator, which ends the GPU work
// in flight, and in the second case ends the job.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "et/dist/peer_watch.hpp"
#include "et/runtime/stream.hpp"

namespace et::dist::detail {

class Watchdog {
 public:
  /// `stuck(message, a_peer_is_gone)`, on the watchdog's thread, at most once.
  using Stuck = std::function<void(const std::string&, bool)>;
  /// How long a rank may still wait for a collective after a peer left: the peer's part of
  /// a collective it joined before leaving completes within this.
  static constexpr std::chrono::seconds departure_grace{2};

  Watchdog(int rank, std::chrono::milliseconds timeout, const PeerWatch* peers, Stuck stuck)
      : rank_(rank), timeout_(timeout), peers_(peers), stuck_(std::move(stuck)), thread_([this] { watch(); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    for (auto& p : pending_) (void)cudaEventDestroy(p.done);
    for (cudaEvent_t e : idle_) (void)cudaEventDestroy(e);
  }

  /// Marks the end of collective `what` (a string literal) on `stream`. Costs the host an
  /// event record: the events are reused, and the thread is not woken (it looks every
  /// 50 ms), so that a small collective's launch is not slowed by its watch.
  void watch_until_done(const char* what, cudaStream_t stream) {
    cudaEvent_t done = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        done = idle_.back();
        idle_.pop_back();
      }
    }
    if (!done) ET_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    ET_CUDA_CHECK(cudaEventRecord(done, stream));
    std::lock_guard lock(mutex_);
    pending_.push_back({done, what, std::chrono::steady_clock::now()});
  }

  /// While one lives, this rank's host waits for the other ranks: in a bootstrap exchange,
  /// or in an NCCL call that first connects to its peers (`what`, a string literal).
  class Exchange {
   public:
    Exchange(Watchdog& w, const char* what) : w_(w) {
      std::lock_guard lock(w_.mutex_);
      if (w_.exchanges_++ == 0) w_.exchange_what_ = what, w_.exchange_since_ = std::chrono::steady_clock::now();
    }
    ~Exchange() {
      std::lock_guard lock(w_.mutex_);
      --w_.exchanges_;
    }
    Exchange(const Exchange&) = delete;
    Exchange& operator=(const Exchange&) = delete;

   private:
    Watchdog& w_;
  };

 private:
  struct Pending {
    cudaEvent_t done;
    const char* what;
    std::chrono::steady_clock::time_point since;
  };

  /// Drops the completed collectives; the message if this rank is stuck, else "".
  std::string check() {
    const auto now = std::chrono::steady_clock::now();
    while (!pending_.empty()) {
      Pending& front = pending_.front();
      const cudaError_t status = cudaEventQuery(front.done);
      if (status != cudaErrorNotReady) {
        idle_.push_back(front.done);
        pending_.pop_front();
        continue;
      }
      (void)cudaGetLastError();
      break;
    }
    const char* waiting_for = !pending_.empty() ? pending_.front().what : exchanges_ > 0 ? exchange_what_ : nullptr;
    if (!waiting_for) return {};
    if (const auto gone = peers_ ? peers_->departed() : std::nullopt; gone && now - gone->when >= departure_grace) {
      gone_ = true;
      return "et: dist: rank " + std::to_string(gone->rank) +
             (gone->died ? " died (its process ended without leaving the group)" : " left the group") +
             " while rank " + std::to_string(rank_) + " waits for it in " + waiting_for +
             "; the communicator was aborted";
    }
    const auto since = !pending_.empty() ? pending_.front().since : exchange_since_;
    if (now - since >= timeout_)
      return std::string("et: dist: ") + waiting_for + " on rank " + std::to_string(rank_) +
             " did not complete within " + std::to_string(timeout_.count()) +
             " ms (did every rank call it, with the same tensors?); the communicator was aborted, and this "
             "process group can no longer be used";
    return {};
  }

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) break;
      if (std::string why = check(); !why.empty()) {
        lock.unlock();
        stuck_(why, gone_);
        return;  // the communicator is gone: nothing more to watch
      }
    }
  }

  int rank_;
  std::chrono::milliseconds timeout_;
  const PeerWatch* peers_;
  Stuck stuck_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> idle_;  ///< recorded and completed: free for the next collective
  int exchanges_ = 0;  ///< host waits in progress (guarded by mutex_, as the two below)
  const char* exchange_what_ = nullptr;
  std::chrono::steady_clock::time_point exchange_since_;
  bool gone_ = false;
  bool stop_ = false;
  std::thread thread_;  ///< last: started once the rest is built
};

}  // namespace et::dist::detail
