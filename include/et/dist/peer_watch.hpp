// Who is still in the job: a TCP connection from every rank to rank 0, kept open for the
// life of a process group and read by a thread of its own, so that a rank learns within
// milliseconds that another rank left (said goodbye: its group was destroyed) or died (its
// connection closed without a goodbye: a crash, a signal, an exit without destroying the
// group). Rank 0 passes each departure on to the others. The process group
// (dist/process_group.hpp) ends its rank when a peer died, and when a peer left while this
// rank waits for it; so a failing rank takes the job down in seconds, not at a timeout.
// Host code only; the connection's address comes through the bootstrap (MPI or TCP).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "et/dist/bootstrap.hpp"

namespace et::dist {

/// A rank that is no longer in the job.
struct Departure {
  int rank = -1;
  bool died = false;  ///< its connection closed without a goodbye
  std::chrono::steady_clock::time_point when;
};

class PeerWatch {
 public:
  /// Called on the watch's thread, once for each rank that leaves or dies.
  using OnDeparture = std::function<void(const Departure&)>;

  /// Connects every rank of `boot` to rank 0 (a collective call: every rank makes it),
  /// within `timeout`. Ranks on rank 0's host connect to 127.0.0.1, the others to its
  /// host name.
  PeerWatch(Bootstrap& boot, std::chrono::milliseconds timeout, OnDeparture on_departure)
      : rank_(boot.rank()), size_(boot.size()), on_departure_(std::move(on_departure)) {
    if (size_ == 1) return;
    if (::pipe2(wake_, O_CLOEXEC) != 0) throw Error("et: dist: " + detail::system_error("pipe"));
    const auto deadline = detail::Clock::now() + timeout;
    detail::Socket listener;
    std::string mine = host_name() + " ";
    if (rank_ == 0) {
      int port = 0;
      listener = detail::listen_on(0, size_, port);
      mine += std::to_string(port);
    }
    const std::vector<std::string> all = boot.all_gather(mine);
    if (rank_ == 0) {
      peers_.resize(std::size_t(size_ - 1));
      for (int joined = 1; joined < size_; ++joined) {
        detail::Socket peer = detail::accept_one(listener, deadline, "et: dist: the peer watch of rank 0");
        std::int32_t r = -1;
        peer.receive_all(&r, sizeof r, deadline, "its rank");
        if (r < 1 || r >= size_ || peers_[std::size_t(r - 1)].fd() >= 0)
          throw Error("et: dist: the peer watch got an unknown rank " + std::to_string(r));
        peer.set_peer("rank " + std::to_string(r));
        peers_[std::size_t(r - 1)] = std::move(peer);
      }
    } else {
      const std::string& root = all[0];
      const std::size_t space = root.rfind(' ');
      const std::string host = root.substr(0, space);
      const std::string address = host == host_name() ? "127.0.0.1" : host;
      peers_.push_back(detail::connect_to(address, std::stoi(root.substr(space + 1)), deadline,
                                          "the peer watch of rank " + std::to_string(rank_), "rank 0"));
      const std::int32_t r = rank_;
      peers_[0].send_all(&r, sizeof r);
    }
    said_goodbye_.assign(peers_.size(), false);
    thread_ = std::thread([this] { watch(); });
    Live& live = Live::get();
    std::lock_guard lock(live.mutex);
    live.watches.push_back(this);
  }
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// Says goodbye (this rank leaves the job in order) and stops watching.
  ~PeerWatch() {
    if (!thread_.joinable()) return;
    {
      Live& live = Live::get();
      std::lock_guard lock(live.mutex);
      std::erase(live.watches, this);
    }
    say_goodbye();
    (void)!::write(wake_[1], "x", 1);
    thread_.join();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  /// The first rank that left or died, if any did.
  std::optional<Departure> departed() const {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  /// The watches of this process, so that exit() says goodbye for those still alive (a
  /// process group in a static, or exit() called with one on the stack): a clean exit is
  /// then not taken for a death by the other ranks.
  struct Live {
    std::mutex mutex;
    std::vector<PeerWatch*> watches;
    static Live& get() {
      static Live* live = [] {
        auto* l = new Live;  // never destroyed: the exit handler may run after static destructors
        std::atexit([] {
          Live& me = get();
          std::lock_guard lock(me.mutex);
          for (PeerWatch* w : me.watches) w->say_goodbye();
        });
        return l;
      }();
      return *live;
    }
  };

  void say_goodbye() {
    left_.store(true);
    const char bye = 'B';
    for (const auto& peer : peers_) (void)::send(peer.fd(), &bye, 1, MSG_NOSIGNAL);
  }

  static std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
    return name;
  }

  void depart(int rank, bool died) {
    if (left_.load()) return;  // this rank said goodbye: what follows is the others going too
    const Departure d{rank, died, detail::Clock::now()};
    {
      std::lock_guard lock(mutex_);
      for (const int r : gone_)
        if (r == rank) return;
      gone_.push_back(rank);
      if (!first_) first_ = d;
    }
    if (rank_ == 0) {  // pass it on: 'L' (left) or 'D' (died) and the rank
      char message[5] = {died ? 'D' : 'L'};
      const std::int32_t r = rank;
      std::memcpy(message + 1, &r, sizeof r);
      for (const auto& peer : peers_)
        if (peer.fd() >= 0) (void)::send(peer.fd(), message, sizeof message, MSG_NOSIGNAL);
    }
    if (on_departure_) on_departure_(d);
  }

  /// Reads what peer k sent: false once its connection is closed.
  bool read_from(std::size_t k) {
    char what = 0;
    const ssize_t got = ::recv(peers_[k].fd(), &what, 1, 0);
    if (got < 0 && errno == EINTR) return true;
    const int peer_rank = rank_ == 0 ? int(k) + 1 : 0;
    if (got <= 0) {
      if (!said_goodbye_[k]) depart(peer_rank, true);
      return false;
    }
    if (what == 'B') {
      said_goodbye_[k] = true;
      depart(peer_rank, false);
    } else if (rank_ != 0 && (what == 'L' || what == 'D')) {
      std::int32_t r = -1;
      try {
        peers_[k].receive_all(&r, sizeof r, detail::Clock::now() + std::chrono::seconds(5), "a departure");
      } catch (const Error&) {
        if (!said_goodbye_[k]) depart(0, true);
        return false;
      }
      depart(r, what == 'D');
    }
    return true;
  }

  void watch() {
    std::vector<bool> open(peers_.size(), true);
    for (;;) {
      std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
      std::vector<std::size_t> which;
      for (std::size_t k = 0; k != peers_.size(); ++k)
        if (open[k]) {
          fds.push_back({peers_[k].fd(), POLLIN, 0});
          which.push_back(k);
        }
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;  // the destructor: this rank leaves
      for (std::size_t i = 1; i != fds.size(); ++i)
        if (fds[i].revents && !read_from(which[i - 1])) open[which[i - 1]] = false;
    }
  }

  int rank_, size_;
  OnDeparture on_departure_;
  int wake_[2] = {-1, -1};
  std::vector<detail::Socket> peers_;  // rank 0: ranks 1 .. size - 1; the others: rank 0
  std::vector<bool> said_goodbye_;     // written by the watch thread only
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<int> gone_;
  std::optional<Departure> first_;
  std::atomic<bool> left_{false};
};

}  // namespace et::dist
