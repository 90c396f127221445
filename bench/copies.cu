// Copies between the host and a GPU, and between two GPUs, beside what CUDA does directly:
//
//   h2d pageable   Tensor<Cpu>.to(cuda<0>)                   limit: cudaMemcpy from pinned memory
//   h2d pinned     Tensor<Pinned>.to(cuda<0>, non_blocking)  limit: the same
//   d2h pageable   Tensor<Cuda<0>>.to(cpu)                   limit: cudaMemcpy into pinned memory
//   d2h pinned     .to(pinned, non_blocking), then a read    limit: the same
//   peer           Tensor<Cuda<0>>.to(cuda<1>)               limit: cudaMemcpyPeer between cudaMalloc
//                                                             buffers with peer access on (2 GPUs only)
//
// 256 MiB per host copy, 1 GiB per peer copy; each time is the median of --reps copies,
// each timed on the host from before the call until the data is usable (the device
// synchronized, or the pinned result read), after two warm-up copies. Each etensor copy is
// checked against its source. Target (scripts/bench-all): peer >= 0.9x cudaMemcpyPeer.
//
// Usage: et_bench_copies [--json PATH] [--reps N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using bench::json_string;

struct Row {
  std::string workload;
  double bytes = 0, etensor_us = 0, limit_us = 0;
  std::string limit_kind;
  bool ok = true;
};

template <class F>
double host_median_us(F&& copy, int reps) {
  std::vector<double> times;
  for (int r = 0; r < reps + 2; ++r) {
    const auto start = std::chrono::steady_clock::now();
    copy();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (r >= 2) times.push_back(us);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int run(const std::string& json_path, int reps) {
  const et::DeviceProperties& device = et::device_properties(0);
  std::printf("device: %s; %d GPU(s)\n", device.name.c_str(), et::device_count());
  std::vector<Row> rows;
  constexpr std::int64_t host_n = std::int64_t{64} << 20;  // 256 MiB of floats
  const std::size_t host_bytes = host_n * sizeof(float);
  const auto source = et::rand<float>(et::cpu, {host_n}, 1);
  const auto pinned = source.pin();
  const auto gpu = source.to(et::cuda<0>);
  void* raw_pinned = nullptr;
  void* raw_gpu = nullptr;
  ET_CUDA_CHECK(cudaMallocHost(&raw_pinned, host_bytes));
  ET_CUDA_CHECK(cudaMalloc(&raw_gpu, host_bytes));
  std::memcpy(raw_pinned, source.data(), host_bytes);
  const double h2d_limit = host_median_us([&] { ET_CUDA_CHECK(cudaMemcpy(raw_gpu, raw_pinned, host_bytes, cudaMemcpyHostToDevice)); }, reps);
  const double d2h_limit = host_median_us([&] { ET_CUDA_CHECK(cudaMemcpy(raw_pinned, raw_gpu, host_bytes, cudaMemcpyDeviceToHost)); }, reps);
  const float probe = source.data()[host_n - 1];

  et::Tensor<float, 1, et::Cuda<0>> on_gpu;
  Row h2d_pageable{"h2d pageable", double(host_bytes)};
  h2d_pageable.etensor_us = host_median_us([&] { on_gpu = source.to(et::cuda<0>); et::synchronize(et::cuda<0>); }, reps);
  h2d_pageable.ok = on_gpu.slice(0, host_n - 1, host_n).item() == probe;
  Row h2d_pinned{"h2d pinned", double(host_bytes)};
  h2d_pinned.etensor_us = host_median_us([&] { on_gpu = pinned.to(et::cuda<0>, et::non_blocking); et::synchronize(et::cuda<0>); }, reps);
  h2d_pinned.ok = on_gpu.slice(0, host_n - 1, host_n).item() == probe;
  for (Row* r : {&h2d_pageable, &h2d_pinned}) {
    r->limit_us = h2d_limit;
    r->limit_kind = "cudaMemcpy, pinned";
    rows.push_back(*r);
  }
  float seen = 0;
  Row d2h_pageable{"d2h pageable", double(host_bytes)};
  d2h_pageable.etensor_us = host_median_us([&] { seen = gpu.to(et::cpu).data()[host_n - 1]; }, reps);
  d2h_pageable.ok = seen == probe;
  Row d2h_pinned{"d2h pinned", double(host_bytes)};
  d2h_pinned.etensor_us = host_median_us([&] { seen = gpu.to(et::pinned, et::non_blocking).data()[host_n - 1]; }, reps);
  d2h_pinned.ok = seen == probe;
  for (Row* r : {&d2h_pageable, &d2h_pinned}) {
    r->limit_us = d2h_limit;
    r->limit_kind = "cudaMemcpy, pinned";
    rows.push_back(*r);
  }
  ET_CUDA_CHECK(cudaFreeHost(raw_pinned));
  ET_CUDA_CHECK(cudaFree(raw_gpu));

  if (et::device_count() >= 2) {
    constexpr std::int64_t peer_n = std::int64_t{256} << 20;  // 1 GiB of floats
    const std::size_t peer_bytes = peer_n * sizeof(float);
    const auto a = et::rand<float>(et::cuda<0>, {peer_n}, 2);
    et::Tensor<float, 1, et::Cuda<1>> b;
    Row peer{"peer", double(peer_bytes)};
    peer.etensor_us = host_median_us([&] {
      b = a.to(et::cuda<1>);
      et::synchronize(et::cuda<1>);
    }, reps);
    peer.ok = et::max(et::abs(b.to(et::cuda<0>) - a)).item() == 0.0f;
    void *src = nullptr, *dst = nullptr;
    ET_CUDA_CHECK(cudaSetDevice(0));
    ET_CUDA_CHECK(cudaMalloc(&src, peer_bytes));
    (void)cudaDeviceEnablePeerAccess(1, 0);
    ET_CUDA_CHECK(cudaSetDevice(1));
    ET_CUDA_CHECK(cudaMalloc(&dst, peer_bytes));
    (void)cudaDeviceEnablePeerAccess(0, 0);
    (void)cudaGetLastError();
    peer.limit_us = host_median_us([&] {
      ET_CUDA_CHECK(cudaMemcpyPeer(dst, 1, src, 0, peer_bytes));
      ET_CUDA_CHECK(cudaDeviceSynchronize());
    }, reps);
    peer.limit_kind = "cudaMemcpyPeer";
    ET_CUDA_CHECK(cudaFree(dst));
    ET_CUDA_CHECK(cudaSetDevice(0));
    ET_CUDA_CHECK(cudaFree(src));
    rows.push_back(peer);
  } else {
    std::printf("peer: not measured, this machine has one GPU\n");
  }

  bool ok = true;
  std::printf("\n%-14s %10s %12s %12s %10s %10s %-20s %s\n", "workload", "MiB", "etensor us", "limit us", "et GB/s",
              "limit/et", "limit", "check");
  for (const Row& r : rows) {
    ok = ok && r.ok;
    std::printf("%-14s %10.0f %12.1f %12.1f %10.1f %10.3f %-20s %s\n", r.workload.c_str(), r.bytes / (1 << 20),
                r.etensor_us, r.limit_us, r.bytes / r.etensor_us / 1e3, r.limit_us / r.etensor_us, r.limit_kind.c_str(),
                r.ok ? "ok" : "WRONG");
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n  \"benchmark\": \"copies\",\n  \"device\": " << json_string(device.name)
        << ",\n  \"gpus\": " << et::device_count() << ",\n  \"reps\": " << reps << ",\n  \"ok\": " << (ok ? "true" : "false")
        << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << "    {\"workload\": " << json_string(r.workload) << ", \"size\": \"" << r.bytes / (1 << 20) << " MiB\""
          << ", \"bytes\": " << r.bytes << ", \"etensor_us\": " << r.etensor_us << ", \"limit_us\": " << r.limit_us
          << ", \"limit_kind\": " << json_string(r.limit_kind) << ", \"ok\": " << (r.ok ? "true" : "false") << "}"
          << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 3) {
    std::fprintf(stderr, "--reps must be at least 3\n");
    return 2;
  }
  if (!et::cuda_available()) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  return run(json_path, reps);
}
