// The distributed bootstrap over TCP (et/dist/bootstrap.hpp), on this host: ranks as
// threads of one process, each with its own connection, as separate processes would have.
#include <et/dist/bootstrap.hpp>

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
  set("MASTER_ADDR", nullptr);
  CHECK_THROWS_WITH(et::dist::tcp_bootstrap_from_environment(), Catch::Contains("MASTER_ADDR"));
  clear();
}
