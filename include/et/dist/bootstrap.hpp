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

#include "et/dist/launcher.hpp"
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
  /// Ends this process and, where the launcher can, the whole job (MPI_Abort under MPI):
  /// what a rank does when another rank died and this one cannot go on.
  [[noreturn]] virtual void abort_job() noexcept { std::_Exit(EXIT_FAILURE); }
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
  if (status != 0) throw Error("et: dist: cannot resolve the host " + host + ": " + ::gai_strerror(status));
  return {found, ::freeaddrinfo};
}

/// A socket listening on `port` (0: a port the kernel picks, written to `bound`).
inline Socket listen_on(int port, int backlog, int& bound) {
  const auto addresses = resolve("", port, true);
  int fd = -1;
  for (const addrinfo* a = addresses.get(); a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, backlog) != 0) {
      const std::string why = system_error("bind/listen");
      ::close(fd);
      throw Error("et: dist: rank 0 cannot listen on port " + std::to_string(port) + " (" + why + ")");
    }
  }
  if (fd < 0) throw Error("et: dist: rank 0 cannot open a socket (" + system_error("socket") + ")");
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  bound = ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  return Socket(fd, "the listening socket");
}

/// The next connection to `listener`; et::Error with `waiting` at the deadline.
inline Socket accept_one(const Socket& listener, Clock::time_point deadline, const std::string& waiting) {
  Socket::wait_readable(listener.fd(), deadline, waiting);
  const int conn = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) throw Error("et: dist: rank 0: " + system_error("accept"));
  return Socket(conn, "a rank that is joining");
}

/// A connection to addr:port, tried again until the deadline (the listener may not be up
/// yet); et::Error naming `who` and `peer` when none is made.
inline Socket connect_to(const std::string& addr, int port, Clock::time_point deadline, const std::string& who,
                         const std::string& peer) {
  std::string last_error;
  for (;;) {
    const auto addresses = resolve(addr, port, false);
    for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        return Socket(fd, peer + " at " + addr + ":" + std::to_string(port));
      }
      last_error = system_error("connect");
      ::close(fd);
    }
    if (Clock::now() >= deadline)
      throw Error("et: dist: " + who + " could not reach " + peer + " at " + addr + ":" + std::to_string(port) +
                  " within the timeout (" + last_error + ")");
    ::usleep(20000);
  }
}

}  // namespace detail

/// torchrun's rendezvous, reduced to what NCCL needs: rank 0 listens on port; every other
/// rank connects to addr:port and says its rank; all_gather goes through rank 0.
class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(int rank, int size, int local_rank, const std::string& addr, int port, BootstrapOptions options = {})
      : rank_(rank), size_(size), local_rank_(local_rank), timeout_(options.timeout) {
    if (size < 1 || rank < 0 || rank >= size || local_rank < 0 || local_rank >= size)
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
    int bound = 0;
    const detail::Socket listener = detail::listen_on(port, size_, bound);
    peers_.resize(std::size_t(size_ - 1));
    for (int joined = 1; joined < size_; ++joined) {
      detail::Socket peer = detail::accept_one(
          listener, deadline, "et: dist: rank 0 waited at " + where_ + " for the other ranks; " + missing() + " did not join");
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
    peers_.push_back(detail::connect_to(addr, port, deadline, "rank " + std::to_string(rank_), "rank 0"));
    const std::int32_t hello[2] = {rank_, size_};
    peers_[0].send_all(hello, sizeof hello);
    char ok = 0;
    peers_[0].receive_all(&ok, 1, deadline, "the other ranks to join");
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
  if (*size == 1 && *rank == 0 && local == 0) return std::make_unique<SingleProcess>();
  return std::make_unique<TcpBootstrap>(*rank, *size, local, addr, *port, options);  // checks the ranks
}

}  // namespace et::dist
