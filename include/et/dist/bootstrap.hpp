// How the processes of a distributed job find each other and exchange the few small
// messages that come before NCCL and beside it (its unique id, the shapes a collective is
// about to take): MPI when the job was started by mpirun or srun (and etensor was built
// with MPI), else TCP to MASTER_ADDR:MASTER_PORT as torchrun sets it (RANK, WORLD_SIZE,
// LOCAL_RANK), else one process on its own. Host code only: dist/process_group.hpp builds
// the NCCL communicator on top.
//
//   auto boot = et::dist::bootstrap_from_environment({.timeout = std::chrono::seconds(60)});
//   std::vector<std::string> all = boot->all_gather(mine);  // every rank's bytes, in rank order
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "et/runtime/error.hpp"

namespace et::dist {

/// The processes of one job as the bootstrap sees them.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// The rank among the processes of this host (which GPU the process takes).
  virtual int local_rank() const noexcept = 0;
  /// "MPI", "TCP" or "single process", for messages.
  virtual const char* kind() const noexcept = 0;
  /// Every process's `bytes`, in rank order. Every process calls it, the same number of
  /// times; lengths may differ.
  virtual std::vector<std::string> all_gather(const std::string& bytes) = 0;
};

struct BootstrapOptions {
  /// How long a process waits for the others (to join, or to send) before et::Error.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

/// One process: all_gather gives back what it is given.
class SingleProcess final : public Bootstrap {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  int local_rank() const noexcept override { return 0; }
  const char* kind() const noexcept override { return "single process"; }
  std::vector<std::string> all_gather(const std::string& bytes) override { return {bytes}; }
};

namespace detail {

using Clock = std::chrono::steady_clock;

inline std::string system_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

/// A connected TCP socket, closed when the handle goes; reads and writes wait at most
/// until a deadline, and name the peer in their errors.
class Socket {
 public:
  Socket() = default;
  Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)), peer_(std::move(other.peer_)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      close_fd();
      fd_ = std::exchange(other.fd_, -1);
      peer_ = std::move(other.peer_);
    }
    return *this;
  }
  ~Socket() { close_fd(); }
  int fd() const noexcept { return fd_; }
  const std::string& peer() const noexcept { return peer_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }

  void send_all(const void* data, std::size_t n) const {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t sent = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) throw Error("et: dist: sending to " + peer_ + " failed (" + system_error("send") + ")");
      p += sent, n -= static_cast<std::size_t>(sent);
    }
  }
  void receive_all(void* data, std::size_t n, Clock::time_point deadline, const std::string& waiting_for) const {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      wait_readable(fd_, deadline, "et: dist: no message from " + peer_ + " (" + waiting_for + ")");
      const ssize_t got = ::recv(fd_, p, n, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got == 0) throw Error("et: dist: " + peer_ + " closed its connection (did that process exit?)");
      if (got < 0) throw Error("et: dist: receiving from " + peer_ + " failed (" + system_error("recv") + ")");
      p += got, n -= static_cast<std::size_t>(got);
    }
  }
  void send_string(const std::string& s) const {
    const std::uint64_t n = s.size();
    send_all(&n, sizeof n);
    send_all(s.data(), s.size());
  }
  std::string receive_string(Clock::time_point deadline, const std::string& waiting_for) const {
    std::uint64_t n = 0;
    receive_all(&n, sizeof n, deadline, waiting_for);
    if (n > (std::uint64_t{1} << 32))
      throw Error("et: dist: a message of " + std::to_string(n) + " bytes from " + peer_ + " is not one of etensor's");
    std::string s(static_cast<std::size_t>(n), '\0');
    receive_all(s.data(), s.size(), deadline, waiting_for);
    return s;
  }

  /// Waits until fd can be read (or accepted from); et::Error with `message` at the deadline.
  static void wait_readable(int fd, Clock::time_point deadline, const std::string& message) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) throw Error(message + " within the timeout");
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (ready > 0) return;
      if (ready < 0 && errno != EINTR) throw Error(message + ": " + system_error("poll"));
    }
  }

 private:
  void close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  std::string peer_;
};

/// The addresses of host:port (IPv4 or IPv6), for connect or bind.
inline std::unique_ptr<addrinfo, void (*)(addrinfo*)> resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int status = ::getaddrinfo(passive ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (status != 0) throw Error("et: dist: cannot resolve MASTER_ADDR=" + host + ": " + ::gai_strerror(status));
  return {found, ::freeaddrinfo};
}

}  // namespace detail

/// torchrun's rendezvous, reduced to what NCCL needs: rank 0 listens on port; every other
/// rank connects to addr:port and says its rank; all_gather goes through rank 0.
class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(int rank, int size, int local_rank, const std::string& addr, int port, BootstrapOptions options = {})
      : rank_(rank), size_(size), local_rank_(local_rank), timeout_(options.timeout) {
    if (size < 1 || rank < 0 || rank >= size || local_rank < 0)
      throw Error("et: dist: RANK=" + std::to_string(rank) + ", WORLD_SIZE=" + std::to_string(size) + ", LOCAL_RANK=" +
                  std::to_string(local_rank) + ": each rank must be in 0 .. WORLD_SIZE - 1");
    if (port < 1 || port > 65535) throw Error("et: dist: MASTER_PORT=" + std::to_string(port) + " is not a TCP port");
    where_ = addr + ":" + std::to_string(port);
    const auto deadline = detail::Clock::now() + timeout_;
    if (rank == 0) accept_all(port, deadline);
    else connect_to_root(addr, port, deadline);
  }
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int local_rank() const noexcept override { return local_rank_; }
  const char* kind() const noexcept override { return "TCP"; }

  std::vector<std::string> all_gather(const std::string& bytes) override {
    const auto deadline = detail::Clock::now() + timeout_;
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    if (rank_ != 0) {
      peers_[0].send_string(bytes);
      for (auto& s : all) s = peers_[0].receive_string(deadline, "all_gather");
      return all;
    }
    all[0] = bytes;
    for (int r = 1; r < size_; ++r)
      all[std::size_t(r)] = peers_[std::size_t(r - 1)].receive_string(deadline, "all_gather");
    for (const auto& peer : peers_)
      for (const auto& s : all) peer.send_string(s);
    return all;
  }

 private:
  void accept_all(int port, detail::Clock::time_point deadline) {
    const auto addresses = detail::resolve("", port, true);
    int fd = -1;
    for (const addrinfo* a = addresses.get(); a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, size_) != 0) {
        const std::string why = detail::system_error("bind/listen");
        ::close(fd);
        throw Error("et: dist: rank 0 cannot listen on port " + std::to_string(port) + " (" + why + ")");
      }
    }
    if (fd < 0) throw Error("et: dist: rank 0 cannot open a socket (" + detail::system_error("socket") + ")");
    const detail::Socket listener(fd, "the listening socket");
    peers_.resize(std::size_t(size_ - 1));
    for (int joined = 1; joined < size_; ++joined) {
      detail::Socket::wait_readable(listener.fd(), deadline,
                                    "et: dist: rank 0 waited at " + where_ + " for the other ranks; " + missing() +
                                        " did not join");
      const int conn = ::accept(listener.fd(), nullptr, nullptr);
      if (conn < 0) throw Error("et: dist: rank 0: " + detail::system_error("accept"));
      detail::Socket peer(conn, "a rank that is joining");
      std::int32_t hello[2] = {};  // its rank and world size
      peer.receive_all(hello, sizeof hello, deadline, "its rank");
      const int r = hello[0];
      if (hello[1] != size_)
        throw Error("et: dist: rank " + std::to_string(r) + " says WORLD_SIZE=" + std::to_string(hello[1]) +
                    ", rank 0 says " + std::to_string(size_));
      if (r < 1 || r >= size_ || peers_[std::size_t(r - 1)].fd() >= 0)
        throw Error("et: dist: two processes say RANK=" + std::to_string(r) + " (or it is out of range)");
      peer.set_peer("rank " + std::to_string(r));
      peers_[std::size_t(r - 1)] = std::move(peer);
    }
    for (const auto& peer : peers_) peer.send_all("k", 1);  // every rank joined
  }

  void connect_to_root(const std::string& addr, int port, detail::Clock::time_point deadline) {
    std::string last_error;
    for (;;) {  // rank 0 may not listen yet: try again until the deadline
      const auto addresses = detail::resolve(addr, port, false);
      for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          peers_.emplace_back(fd, "rank 0 at " + where_);
          const std::int32_t hello[2] = {rank_, size_};
          peers_[0].send_all(hello, sizeof hello);
          char ok = 0;
          peers_[0].receive_all(&ok, 1, deadline, "the other ranks to join");
          return;
        }
        last_error = detail::system_error("connect");
        ::close(fd);
      }
      if (detail::Clock::now() >= deadline)
        throw Error("et: dist: rank " + std::to_string(rank_) + " could not reach rank 0 at " + where_ +
                    " within the timeout (" + last_error + ")");
      ::usleep(20000);
    }
  }

  std::string missing() const {
    std::string list;
    for (int r = 1; r < size_; ++r)
      if (peers_[std::size_t(r - 1)].fd() < 0) list += (list.empty() ? "rank " : ", ") + std::to_string(r);
    return list;
  }

  int rank_, size_, local_rank_;
  std::chrono::milliseconds timeout_;
  std::string where_;
  std::vector<detail::Socket> peers_;  // rank 0: ranks 1 .. size - 1; the others: rank 0
};

namespace detail {

/// An environment variable as a non-negative int; nullopt when unset.
inline std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || value < 0 || value > 1 << 30)
    throw Error(std::string("et: dist: ") + name + "=" + text + " is not a non-negative integer");
  return static_cast<int>(value);
}

}  // namespace detail

/// The bootstrap the environment describes: TCP when WORLD_SIZE is set (RANK and
/// MASTER_ADDR/MASTER_PORT required, LOCAL_RANK defaulting to RANK), else one process.
/// (dist/process_group.hpp tries MPI first, where etensor was built with it.)
inline std::unique_ptr<Bootstrap> tcp_bootstrap_from_environment(BootstrapOptions options = {}) {
  const std::optional<int> size = detail::env_int("WORLD_SIZE");
  if (!size) return std::make_unique<SingleProcess>();
  const std::optional<int> rank = detail::env_int("RANK");
  const char* addr = std::getenv("MASTER_ADDR");
  const std::optional<int> port = detail::env_int("MASTER_PORT");
  if (!rank || !addr || !port)
    throw Error("et: dist: WORLD_SIZE is set, so RANK, MASTER_ADDR and MASTER_PORT must be too (as torchrun sets "
                "them), or start the job with mpirun");
  const int local = detail::env_int("LOCAL_RANK").value_or(*rank);
  if (*size == 1 && *rank == 0) return std::make_unique<SingleProcess>();
  return std::make_unique<TcpBootstrap>(*rank, *size, local, addr, *port, options);  // checks the ranks
}

}  // namespace et::dist
