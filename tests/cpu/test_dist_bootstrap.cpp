// The distributed bootstrap over TCP (et/dist/bootstrap.hpp), on this host: ranks as
// threads of one process, each with its own connection, as separate processes would have;
// the launcher's variables (et/dist/launcher.hpp); the peer watch (et/dist/peer_watch.hpp),
// with a rank in a child process that dies or leaves.
#include <et/dist/bootstrap.hpp>
#include <et/dist/peer_watch.hpp>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

/// A TCP port nothing listens on now (the kernel's choice for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

/// Runs body(rank) on a thread per rank in `ranks`; the error each threw, or "".
std::vector<std::string> run_ranks(const std::vector<int>& ranks, const std::function<void(int)>& body) {
  std::vector<std::future<std::string>> results;
  for (const int r : ranks)
    results.push_back(std::async(std::launch::async, [&body, r]() -> std::string {
      try {
        body(r);
        return "";
      } catch (const std::exception& e) {
        return e.what();
      }
    }));
  std::vector<std::string> errors;
  for (auto& result : results) errors.push_back(result.get());
  return errors;
}

}  // namespace

TEST_CASE("TCP bootstrap: every rank gets every rank's bytes, in rank order", "[dist]") {
  const int port = free_port();
  for (const int size : {2, 5}) {
    std::vector<std::vector<std::string>> gathered(static_cast<std::size_t>(size));
    std::vector<int> ranks;
    for (int r = size - 1; r >= 0; --r) ranks.push_back(r);  // rank 0 starts last: the others retry
    const auto errors = run_ranks(ranks, [&](int r) {
      et::dist::TcpBootstrap boot(r, size, r % 2, "127.0.0.1", port, {.timeout = 20s});
      CHECK(boot.rank() == r);
      CHECK(boot.size() == size);
      CHECK(boot.local_rank() == r % 2);
      const auto first = boot.all_gather(std::string(std::size_t(r), char('a' + r)));  // rank 0 sends nothing
      const auto second = boot.all_gather("rank " + std::to_string(r));
      auto& mine = gathered[std::size_t(r)];
      mine = first;
      mine.insert(mine.end(), second.begin(), second.end());
    });
    CAPTURE(size);
    for (const auto& error : errors) CHECK(error.empty());
    for (const auto& mine : gathered) {
      REQUIRE(mine.size() == std::size_t(2 * size));
      for (int r = 0; r < size; ++r) {
        CHECK(mine[std::size_t(r)] == std::string(std::size_t(r), char('a' + r)));
        CHECK(mine[std::size_t(size + r)] == "rank " + std::to_string(r));
      }
    }
  }
}

TEST_CASE("TCP bootstrap: a rank that never joins, or no rank 0, is an error within the timeout", "[dist]") {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const auto errors =
      run_ranks({0, 1}, [&](int r) { et::dist::TcpBootstrap(r, 3, 0, "127.0.0.1", port, {.timeout = 800ms}); });
  CHECK_THAT(errors[0], Catch::Contains("rank 2 did not join") && Catch::Contains("127.0.0.1:"));
  CHECK_THAT(errors[1], Catch::Contains("et: dist:"));  // rank 0 gave up, or rank 1's own wait timed out
  CHECK(std::chrono::steady_clock::now() - start < 10s);

  const int nobody = free_port();
  const auto alone =
      run_ranks({1}, [&](int r) { et::dist::TcpBootstrap(r, 2, 0, "127.0.0.1", nobody, {.timeout = 300ms}); });
  CHECK_THAT(alone[0], Catch::Contains("rank 1 could not reach rank 0") && Catch::Contains("Connection refused"));
}

TEST_CASE("TCP bootstrap: ranks that disagree are named", "[dist]") {
  CHECK_THROWS_WITH(et::dist::TcpBootstrap(2, 2, 0, "127.0.0.1", 29500), Catch::Contains("RANK=2, WORLD_SIZE=2"));
  CHECK_THROWS_WITH(et::dist::TcpBootstrap(0, 2, 0, "127.0.0.1", 70000), Catch::Contains("MASTER_PORT=70000"));
  const int port = free_port();
  auto errors =
      run_ranks({0, 1, 1}, [&](int r) { et::dist::TcpBootstrap(r, 3, 0, "127.0.0.1", port, {.timeout = 2s}); });
  CHECK_THAT(errors[0], Catch::Contains("two processes say RANK=1"));
  const int port2 = free_port();
  errors = run_ranks({0, 1}, [&](int r) {
    et::dist::TcpBootstrap(r, r == 0 ? 2 : 3, 0, "127.0.0.1", port2, {.timeout = 2s});
  });
  CHECK_THAT(errors[0], Catch::Contains("rank 1 says WORLD_SIZE=3, rank 0 says 2"));
}

TEST_CASE("the bootstrap from torchrun's environment variables", "[dist]") {
  auto set = [](const char* name, const char* value) {
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  };
  auto clear = [&] {
    for (const char* name : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) set(name, nullptr);
  };
  clear();
  CHECK(std::string(et::dist::tcp_bootstrap_from_environment()->kind()) == "single process");
  set("WORLD_SIZE", "1"), set("RANK", "0"), set("MASTER_ADDR", "localhost"), set("MASTER_PORT", "29500");
  CHECK(et::dist::tcp_bootstrap_from_environment()->size() == 1);
  set("RANK", "x1");
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(),
                    Catch::Contains("RANK=x1 is not a non-negative integer"));
  set("RANK", "1");
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(), Catch::Contains("RANK=1, WORLD_SIZE=1"));
  set("RANK", "0"), set("LOCAL_RANK", "5"), set("WORLD_SIZE", "2");
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(), Catch::Contains("LOCAL_RANK=5"));
  set("WORLD_SIZE", "1");
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(), Catch::Contains("LOCAL_RANK=5"));
  set("LOCAL_RANK", nullptr);
  set("MASTER_ADDR", nullptr);
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(), Catch::Contains("MASTER_ADDR"));
  clear();
}

TEST_CASE("the local rank from each launcher's variables, read before MPI starts", "[dist]") {
  const char* names[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE",
                         "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_SIZE", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
                         "SLURM_NTASKS", "SLURM_STEP_ID", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE"};
  auto clear = [&] {
    for (const char* name : names) ::unsetenv(name);
  };
  clear();
  CHECK(et::dist::launch_info_from_environment().launcher == nullptr);
  ::setenv("LOCAL_RANK", "3", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  auto info = et::dist::launch_info_from_environment();
  CHECK(std::string(info.launcher) == "torchrun");
  CHECK(info.local_rank == 3);
  CHECK(info.size == 8);
  ::setenv("SLURM_LOCALID", "1", 1);  // without SLURM_STEP_ID: an allocation's shell, not a step
  CHECK(std::string(et::dist::launch_info_from_environment().launcher) == "torchrun");
  ::setenv("SLURM_STEP_ID", "0", 1);
  ::setenv("SLURM_NTASKS_PER_NODE", "2(x3)", 1);  // uneven nodes: no local size
  info = et::dist::launch_info_from_environment();
  CHECK(std::string(info.launcher) == "Slurm");
  CHECK(info.local_rank == 1);
  CHECK(!info.local_size);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);  // OpenMPI's first
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  info = et::dist::launch_info_from_environment();
  CHECK(std::string(info.launcher) == "OpenMPI");
  CHECK(info.local_rank_variable == "OMPI_COMM_WORLD_LOCAL_RANK");
  CHECK((info.local_rank == 1 && info.local_size == 2 && info.size == 4));
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  CHECK_THROWS_WITH(et::dist::launch_info_from_environment(),
                    Catch::Contains("OMPI_COMM_WORLD_LOCAL_RANK=2 but OMPI_COMM_WORLD_LOCAL_SIZE=2"));
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "-1", 1);
  CHECK_THROWS_WITH(et::dist::launch_info_from_environment(), Catch::Contains("is not a non-negative integer"));
  clear();
}

namespace {

/// Ranks 0 and 2 of a group of three as threads of this process, rank 1 in a child
/// process that ends as `child` says: each parent rank's first departure, or a rank of -1
/// when none came within 10 s.
std::vector<et::dist::Departure> departures_seen(const std::function<void(et::dist::PeerWatch*)>& child) {
  const int port = free_port();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int status = 0;
    try {
      et::dist::TcpBootstrap boot(1, 3, 1, "127.0.0.1", port, {.timeout = 10s});
      auto* watch = new et::dist::PeerWatch(boot, 10s, {});
      child(watch);
    } catch (...) {
      status = 2;
    }
    ::_exit(status);  // no exit handlers: a watch still alive says no goodbye
  }
  std::vector<et::dist::Departure> seen(2);
  const auto errors = run_ranks({0, 2}, [&](int r) {
    et::dist::TcpBootstrap boot(r, 3, r, "127.0.0.1", port, {.timeout = 10s});
    std::promise<et::dist::Departure> first;
    std::once_flag once;
    et::dist::PeerWatch watch(boot, 10s, [&](const et::dist::Departure& d) {
      std::call_once(once, [&] { first.set_value(d); });
    });
    auto future = first.get_future();
    seen[r / 2] = future.wait_for(10s) == std::future_status::ready ? future.get() : et::dist::Departure{};
    CHECK(watch.departed().has_value());
  });
  int status = -1;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (const auto& error : errors) CHECK(error.empty());
  return seen;
}

}  // namespace

TEST_CASE("peer watch: a rank that dies is seen by every rank at once", "[dist]") {
  const auto start = std::chrono::steady_clock::now();
  const auto seen = departures_seen([](et::dist::PeerWatch*) { std::this_thread::sleep_for(100ms); });
  for (const auto& d : seen) {
    CHECK(d.rank == 1);  // rank 2 hears it from rank 0
    CHECK(d.died);
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("peer watch: a rank that leaves says goodbye", "[dist]") {
  const auto seen = departures_seen([](et::dist::PeerWatch* watch) { delete watch; });
  for (const auto& d : seen) {
    CHECK(d.rank == 1);
    CHECK(!d.died);
  }
}
