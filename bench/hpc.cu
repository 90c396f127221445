// HPC codes' statements written with etensor's views, beside the physical limit and hand-written
// CUDA kernels of the same statements (bench/hpc_kernels.cuh), each as a percentage of a
// device-to-device copy of the case's minimal traffic (every array read once and written once
// per step, 4-byte floats):
//
//   jacobi-2d       B[1:-1,1:-1] = 0.2 (five views of A), A and B swapped     8192^2   2 arrays
//   jacobi-2d copy  the same, then A[1:-1,1:-1] = B[1:-1,1:-1]                8192^2   4 passes
//   conv-2d 9-pt    B[1:-1,1:-1] = PolyBench 2DCONV's 3x3 convolution of A    8192^2   2
//   conv-3d 15-pt   PolyBench 3DCONV's 15 terms                              512^3    2
//   heat-3d         B = A + 0.125 (three second differences), then B -> A     512^3    4
//   fdtd-2d         ey, ex, hz updated in place from each other              8192^2   10
//   gesummv         y = alpha A x + beta B x (two matrix-vector products)    8192^2   2 matrices
//   bicg            s = A^T r and q = A p (two products; et::matvec_pair)    8192^2   1 matrix
//   CG              the 2-D Poisson problem, one iteration: three statements 4096^2   11 passes
//                   (stencil + dot, update + dot, direction), eager and as one captured graph
//
// etensor runs each twice: as it plans it (the rows path where every operand is consecutive
// along the last axis), and with the rows path off (the general strided path), so that the
// two stand side by side; every result is compared with the hand kernel's on the device.
// The hand kernels come in two shapes: `grid` (PolyBench/GPU's and RAJAPerf's
// straightforward one element a thread) and `rows` (etensor's rows launch written by hand).
// peers_hpc.py runs the same statements in PyTorch eager, torch.compile and CuPy.
//
// Usage: et_bench_hpc [--json PATH] [--reps N] [--n2 N] [--n3 N] [--only TEXT]   (exit status 1 if a
// check fails; --only: the cases whose name contains TEXT)
#include <et/et.hpp>

#include "common.cuh"
#include "hpc_kernels.cuh"
#include "hpc_solvers.cuh"

#include <cublas_v2.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;
template <int R>
using Grid = et::Tensor<float, R, Gpu>;
using et::range;
using bench::json_string;

struct Row {
  std::string workload, size, variant;
  double bytes = 0, us = 0;
  bool ok = true;
  std::string note;
};

/// The rows path on or off for the scope.
struct RowsPath {
  bool previous;
  explicit RowsPath(bool on) : previous(et::detail::rows_path_enabled().exchange(on)) {}
  ~RowsPath() { et::detail::rows_path_enabled() = previous; }
};

class Hpc {
 public:
  Hpc(int reps, int n2, int n3, std::string only) : reps_(reps), n2_(n2), n3_(n3), only_(std::move(only)) {}

  int run(const std::string& json_path) {
    const et::DeviceProperties& device = et::device_properties(0);
    std::printf("device: %s\n", device.name.c_str());
    copy_limit();
    // Each case named as it starts and synchronized as it ends: a fault is reported by the
    // case that made it, not by a later one's first synchronization.
    const std::pair<const char*, void (Hpc::*)()> cases[] = {
        {"jacobi-2d", &Hpc::jacobi2d}, {"conv-2d 9-point", &Hpc::conv2d9}, {"conv-3d 15-point", &Hpc::conv3d15},
        {"heat-3d", &Hpc::heat3d},     {"fdtd-2d", &Hpc::fdtd2d},          {"gesummv, bicg", &Hpc::gesummv_bicg},
        {"CG", &Hpc::cg}};
    for (const auto& [name, run_case] : cases) {
      if (!only_.empty() && std::string(name).find(only_) == std::string::npos) continue;
      std::printf("case %s\n", name);
      std::fflush(stdout);
      (this->*run_case)();
      et::synchronize(et::cuda<0>);
    }
    return report(json_path, device);
  }

 private:
  int reps_, n2_, n3_;
  std::string only_;  // run only the cases whose name contains it (empty: all)
  double copy_gbs_ = 0;
  std::vector<Row> rows_;

  double time(const std::function<void()>& step) { return bench::median_us(step, 3, reps_); }

  void add(const std::string& workload, const std::string& size, const std::string& variant, double bytes, double us,
           bool ok = true, const std::string& note = "") {
    rows_.push_back({workload, size, variant, bytes, us, ok, note});
  }

  /// A device-to-device copy of 1 GiB: bytes read plus written per second.
  void copy_limit() {
    const std::int64_t n = std::int64_t{1} << 28;
    const Grid<1> a = et::rand<float>(et::cuda<0>, {n}, 1), b = et::empty<float>(et::cuda<0>, {n});
    const double us = time([&] {
      ET_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, bench::stream()));
    });
    copy_gbs_ = 2.0 * n * sizeof(float) / us / 1e3;
    add("copy", "2^28", "cudaMemcpy", 2.0 * n * sizeof(float), us);
    std::printf("copy: %.1f GB/s\n", copy_gbs_);
  }

  /// Runs etensor's statement with the rows path on and off and both hand kernels, checking
  /// each result (`out`, after one step from the same inputs) against the rows hand kernel's.
  void compare(const std::string& workload, const std::string& size, double bytes, const std::function<void()>& reset,
               const std::function<void()>& etensor, const std::function<void()>& grid,
               const std::function<void()>& rows, const std::vector<const Grid<2>*>& out2,
               const std::vector<const Grid<3>*>& out3) {
    // The reference: one step of the rows hand kernel from the reset state, copied aside.
    reset();
    rows();
    std::vector<Grid<1>> want;
    const auto flat = [](const auto& t) { return t.reshape(std::array<std::int64_t, 1>{t.numel()}); };
    for (const auto* t : out2) want.push_back(et::eval(flat(*t)));
    for (const auto* t : out3) want.push_back(et::eval(flat(*t)));
    const auto check = [&](const std::function<void()>& step) {
      reset();
      step();
      bool ok = true;
      std::size_t k = 0;
      const auto one = [&](const auto& t) {
        const Grid<1> got = et::eval(flat(t));
        ok = ok && bench::compare_on_device(got.data(), want[k++].data(), got.numel()).ok();
      };
      for (const auto* t : out2) one(*t);
      for (const auto* t : out3) one(*t);
      return ok;
    };
    for (const bool rows_on : {true, false}) {
      RowsPath path(rows_on);
      const auto before = et::elementwise_path_counts();
      const bool ok = check(etensor);
      const auto after = et::elementwise_path_counts();
      const std::string took = after.rows > before.rows ? "rows" : after.tiled > before.tiled ? "tiled"
                               : after.general > before.general ? "general" : "linear";
      add(workload, size, rows_on ? "etensor" : "etensor, rows path off", bytes, time(etensor), ok, "path: " + took);
    }
    add(workload, size, "hand grid", bytes, time(grid), check(grid));
    add(workload, size, "hand rows", bytes, time(rows));
  }

  void jacobi2d() {
    const int n = n2_;
    Grid<2> a = et::rand<float>(et::cuda<0>, {n, n}, 2), b = et::rand<float>(et::cuda<0>, {n, n}, 3);
    const Grid<2> a0 = a.clone(), b0 = b.clone();
    const auto reset = [&] { a.copy_(a0), b.copy_(b0); };
    const double bytes = 2.0 * (n - 2) * double(n - 2) * sizeof(float);
    const std::string size = std::to_string(n) + "^2";
    // Named windows, as an HPC code binds them once.
    auto b_in = b(range(1, -1), range(1, -1));
    const auto c = a(range(1, -1), range(1, -1)), west = a(range(1, -1), range(0, -2)), east = a(range(1, -1), range(2));
    const auto north = a(range(0, -2), range(1, -1)), south = a(range(2), range(1, -1));
    const hpc::Jacobi2d f{a.data(), b.data(), n};
    compare("jacobi-2d", size, bytes, reset, [&] { b_in = 0.2f * (c + west + east + south + north); },
            [&] { hpc::launch_grid2d(f, 1, n - 1, 1, n - 1, bench::stream()); },
            [&] { hpc::launch_rows2d<4>(f, 1, n - 1, 1, n - 1, bench::stream()); }, {&b}, {});
    // PolyBench's step: the sweep, then the interior copied back.
    auto a_in = a(range(1, -1), range(1, -1));
    const auto b_read = b(range(1, -1), range(1, -1));
    const std::function<void()> two = [&] {
      b_in = 0.2f * (c + west + east + south + north);
      a_in = b_read;  // a window: written, not rebound
    };
    reset();
    two();
    add("jacobi-2d + copy back", size, "etensor", 2 * bytes, time(two));
    add("jacobi-2d + copy back", size, "hand rows + cudaMemcpy2D", 2 * bytes, time([&] {
          hpc::launch_rows2d<4>(f, 1, n - 1, 1, n - 1, bench::stream());
          ET_CUDA_CHECK(cudaMemcpy2DAsync(a.data() + n + 1, n * sizeof(float), b.data() + n + 1, n * sizeof(float),
                                          (n - 2) * sizeof(float), n - 2, cudaMemcpyDeviceToDevice, bench::stream()));
        }));
  }

  void conv2d9() {
    const int n = n2_;
    Grid<2> a = et::rand<float>(et::cuda<0>, {n, n}, 4), b = et::zeros<float>(et::cuda<0>, {n, n});
    const auto reset = [&] { b = 0.0f; };
    const double bytes = 2.0 * (n - 2) * double(n - 2) * sizeof(float);
    auto b_in = b(range(1, -1), range(1, -1));
    const auto at = [&](int di, int dj) {
      return a(range(1 + di, n - 1 + di), range(1 + dj, n - 1 + dj));
    };
    const hpc::Conv2d9 f{a.data(), b.data(), n};
    compare("conv-2d 9-point", std::to_string(n) + "^2", bytes, reset,
            [&] {
              b_in = 0.2f * at(-1, -1) + 0.5f * at(0, -1) - 0.8f * at(1, -1) - 0.3f * at(-1, 0) + 0.6f * at(0, 0) -
                     0.9f * at(1, 0) + 0.4f * at(-1, 1) + 0.7f * at(0, 1) + 0.1f * at(1, 1);
            },
            [&] { hpc::launch_grid2d(f, 1, n - 1, 1, n - 1, bench::stream()); },
            [&] { hpc::launch_rows2d<4>(f, 1, n - 1, 1, n - 1, bench::stream()); }, {&b}, {});
  }

  void conv3d15() {
    const int n = n3_;
    Grid<3> a = et::rand<float>(et::cuda<0>, {n, n, n}, 5), b = et::zeros<float>(et::cuda<0>, {n, n, n});
    const auto reset = [&] { b = 0.0f; };
    const double bytes = 2.0 * (n - 2) * double(n - 2) * (n - 2) * sizeof(float);
    auto b_in = b(range(1, -1), range(1, -1), range(1, -1));
    const auto at = [&](int di, int dj, int dk) {
      return a(range(1 + di, n - 1 + di), range(1 + dj, n - 1 + dj), range(1 + dk, n - 1 + dk));
    };
    const hpc::Conv3d15 f{a.data(), b.data(), n};
    compare("conv-3d 15-point", std::to_string(n) + "^3", bytes, reset,
            [&] {
              b_in = 2.0f * at(-1, -1, -1) + 4.0f * at(1, -1, -1) + 5.0f * at(-1, -1, -1) + 7.0f * at(1, -1, -1) -
                     8.0f * at(-1, -1, -1) + 10.0f * at(1, -1, -1) - 3.0f * at(0, -1, 0) + 6.0f * at(0, 0, 0) -
                     9.0f * at(0, 1, 0) + 2.0f * at(-1, -1, 1) + 4.0f * at(1, -1, 1) + 5.0f * at(-1, 0, 1) +
                     7.0f * at(1, 0, 1) - 8.0f * at(-1, 1, 1) + 10.0f * at(1, 1, 1);
            },
            [&] { hpc::launch_grid3d(f, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream()); },
            [&] { hpc::launch_rows3d<4>(f, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream()); }, {}, {&b});
  }

  void heat3d() {
    const int n = n3_;
    Grid<3> a = et::rand<float>(et::cuda<0>, {n, n, n}, 6), b = et::rand<float>(et::cuda<0>, {n, n, n}, 7);
    const Grid<3> a0 = a.clone(), b0 = b.clone();
    const auto reset = [&] { a.copy_(a0), b.copy_(b0); };
    const double bytes = 4.0 * (n - 2) * double(n - 2) * (n - 2) * sizeof(float);
    const auto sweep = [&](const Grid<3>& from, const Grid<3>& to) {
      const auto at = [&](int di, int dj, int dk) {
        return from(range(1 + di, n - 1 + di), range(1 + dj, n - 1 + dj), range(1 + dk, n - 1 + dk));
      };
      to(range(1, -1), range(1, -1), range(1, -1)) =
          0.125f * (at(1, 0, 0) - 2.0f * at(0, 0, 0) + at(-1, 0, 0)) +
          0.125f * (at(0, 1, 0) - 2.0f * at(0, 0, 0) + at(0, -1, 0)) +
          0.125f * (at(0, 0, 1) - 2.0f * at(0, 0, 0) + at(0, 0, -1)) + at(0, 0, 0);
    };
    const hpc::Heat3d ab{a.data(), b.data(), n}, ba{b.data(), a.data(), n};
    compare("heat-3d (A->B, B->A)", std::to_string(n) + "^3", bytes, reset, [&] { sweep(a, b), sweep(b, a); },
            [&] {
              hpc::launch_grid3d(ab, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream());
              hpc::launch_grid3d(ba, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream());
            },
            [&] {
              hpc::launch_rows3d<4>(ab, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream());
              hpc::launch_rows3d<4>(ba, 1, n - 1, 1, n - 1, 1, n - 1, bench::stream());
            },
            {}, {&a, &b});
  }

  void fdtd2d() {
    const int n = n2_;
    Grid<2> ex = et::rand<float>(et::cuda<0>, {n, n}, 8), ey = et::rand<float>(et::cuda<0>, {n, n}, 9),
            hz = et::rand<float>(et::cuda<0>, {n, n}, 10);
    const Grid<2> ex0 = ex.clone(), ey0 = ey.clone(), hz0 = hz.clone();
    const auto reset = [&] { ex.copy_(ex0), ey.copy_(ey0), hz.copy_(hz0); };
    const double bytes = 10.0 * double(n) * n * sizeof(float);
    auto ey_lo = ey(range(1)), ex_lo = ex(range(), range(1)), hz_in = hz(range(0, -1), range(0, -1));
    const auto step = [&] {
      ey_lo = ey_lo - 0.5f * (hz(range(1)) - hz(range(0, -1)));
      ex_lo = ex_lo - 0.5f * (hz(range(), range(1)) - hz(range(), range(0, -1)));
      hz_in = hz_in - 0.7f * (ex(range(0, -1), range(1)) - ex(range(0, -1), range(0, -1)) + ey(range(1), range(0, -1)) -
                              ey(range(0, -1), range(0, -1)));
    };
    const hpc::FdtdEy fy{ey.data(), hz.data(), n};
    const hpc::FdtdEx fx{ex.data(), hz.data(), n};
    const hpc::FdtdHz fz{hz.data(), ex.data(), ey.data(), n};
    compare("fdtd-2d (ey, ex, hz)", std::to_string(n) + "^2", bytes, reset, step,
            [&] {
              hpc::launch_grid2d(fy, 1, n, 0, n, bench::stream());
              hpc::launch_grid2d(fx, 0, n, 1, n, bench::stream());
              hpc::launch_grid2d(fz, 0, n - 1, 0, n - 1, bench::stream());
            },
            [&] {
              hpc::launch_rows2d<4>(fy, 1, n, 0, n, bench::stream());
              hpc::launch_rows2d<4>(fx, 0, n, 1, n, bench::stream());
              hpc::launch_rows2d<4>(fz, 0, n - 1, 0, n - 1, bench::stream());
            },
            {&ex, &ey, &hz}, {});
  }

  void gesummv_bicg() {
    const int n = n2_;
    const Grid<2> a = et::rand<float>(et::cuda<0>, {n, n}, 11), b = et::rand<float>(et::cuda<0>, {n, n}, 12);
    const Grid<1> x = et::rand<float>(et::cuda<0>, {n}, 13), r = et::rand<float>(et::cuda<0>, {n}, 14);
    Grid<1> y = et::zeros<float>(et::cuda<0>, {n}), s = et::zeros<float>(et::cuda<0>, {n}), q = et::zeros<float>(et::cuda<0>, {n});
    const float alpha = 1.5f, beta = 1.2f;
    const double matrix = double(n) * n * sizeof(float);
    const std::string size = std::to_string(n) + "^2";
    add("gesummv", size, "etensor", 2 * matrix, time([&] {
          y = alpha * et::matmul(a, x);
          y = beta * et::matmul(b, x) + y;  // one GEMM with beta: the update form
        }));
    cublasHandle_t handle;
    cublasCreate(&handle);
    cublasSetStream(handle, bench::stream());
    Grid<1> y2 = et::zeros<float>(et::cuda<0>, {n});
    const float one = 1.0f, zero = 0.0f;
    // Each result is checked after its timing ran (a check passed as add()'s argument beside
    // time(...) may run first: the order of a call's arguments is unspecified, and GCC's
    // checked s1 before the timing had made it: a null pointer, the illegal address of
    // 2026-12-07).
    const double sgemv_us = time([&] {
      // row-major A is column-major A^T: y = alpha A x is gemv with CUBLAS_OP_T
      cublasSgemv(handle, CUBLAS_OP_T, n, n, &alpha, a.data(), n, x.data(), 1, &zero, y2.data(), 1);
      cublasSgemv(handle, CUBLAS_OP_T, n, n, &beta, b.data(), n, x.data(), 1, &one, y2.data(), 1);
    });
    add("gesummv", size, "cuBLAS sgemv (two calls)", 2 * matrix, sgemv_us,
        bench::compare_on_device(y.data(), y2.data(), n, 1e-4).ok());
    add("bicg", size, "etensor (two products)", matrix, time([&] {
          s = et::matmul(a.transpose(0, 1), r);
          q = et::matmul(a, x);
        }));
    Grid<1> s1, q1;
    const double pair_us = time([&] {
      auto [ax, aty] = et::matvec_pair(a, x, r);
      q1 = std::move(ax), s1 = std::move(aty);
    });
    add("bicg", size, "etensor matvec_pair (A read once)", matrix, pair_us,
        bench::compare_on_device(s.data(), s1.data(), n, 1e-4).ok() &&
            bench::compare_on_device(q.data(), q1.data(), n, 1e-4).ok());
    Grid<1> s2 = et::zeros<float>(et::cuda<0>, {n}), q2 = et::zeros<float>(et::cuda<0>, {n});
    const auto hand = [&] {
      ET_CUDA_CHECK(cudaMemsetAsync(s2.data(), 0, n * sizeof(float), bench::stream()));
      ET_CUDA_CHECK(cudaMemsetAsync(q2.data(), 0, n * sizeof(float), bench::stream()));
      const dim3 grid((n + 255) / 256, (n + 8 * hpc::bicg_rows_per_warp - 1) / (8 * hpc::bicg_rows_per_warp));
      hpc::bicg<<<grid, 256, 0, bench::stream()>>>(a.data(), r.data(), x.data(), s2.data(), q2.data(), n);
    };
    const double hand_us = time(hand);
    const bool ok = bench::compare_on_device(s.data(), s2.data(), n, 1e-4).ok() &&
                    bench::compare_on_device(q.data(), q2.data(), n, 1e-4).ok();
    add("bicg", size, "hand fused (A read once)", matrix, hand_us, ok);
    cublasDestroy(handle);
  }

  /// CG on the Poisson problem of an n x n interior: etensor's three statements (as
  /// examples/cg_poisson.cpp) beside the hand-fused three kernels, eager and captured.
  void cg() {
    const int n = n2_ / 2;
    const std::int64_t side = n + 2, total = side * side;
    const std::string size = std::to_string(n) + "^2";
    const double bytes = 11.0 * total * sizeof(float);
    constexpr int batch = 20;  // iterations per timed call (and per captured graph)
    const Grid<2> b0 = [&] {
      Grid<2> b = et::zeros<float>(et::cuda<0>, {side, side});
      b(range(1, -1), range(1, -1)) = et::rand<float>(et::cuda<0>, {n, n}, 15);
      return b;
    }();
    // etensor
    Grid<2> x = et::zeros<float>(et::cuda<0>, {side, side}), r = b0.clone(), p = b0.clone(),
            ap = et::zeros<float>(et::cuda<0>, {side, side});
    et::Tensor<float, 0, Gpu> rr = et::scalar<float>(et::cuda<0>), rr_next = et::scalar<float>(et::cuda<0>),
                              pap = et::scalar<float>(et::cuda<0>);
    const auto center = p(range(1, -1), range(1, -1)), north = p(range(0, -2), range(1, -1)),
               south = p(range(2), range(1, -1)), west = p(range(1, -1), range(0, -2)), east = p(range(1, -1), range(2));
    auto ap_inside = ap(range(1, -1), range(1, -1));
    const auto reset = [&] {
      x = 0.0f, ap = 0.0f;
      r.copy_(b0), p.copy_(b0);
      et::assign(rr, et::sum_of(r * r));
    };
    const auto iterate = [&] {
      const auto product = 4.0f * center - north - south - west - east;
      et::assign(std::tie(ap_inside, pap), product, et::sum_of(center * product));
      const auto alpha = rr / pap;
      const auto r_next = r - alpha * ap;
      et::assign(std::tie(x, r, rr_next), x + alpha * p, r_next, et::sum_of(r_next * r_next));
      et::assign(std::tie(p, rr), r + (rr_next / rr) * p, rr_next);
    };
    const auto run = [&] {
      for (int k = 0; k < batch; ++k) iterate();
    };
    reset();
    run();
    const Grid<2> x_etensor = x.clone();
    reset();
    add("CG iteration", size, "etensor, eager", bytes, time(run) / batch);
    reset();
    run();  // set up before the capture
    const auto stream = et::Stream<Gpu>::create();
    const auto graph = et::capture(stream, run);
    const auto on = et::current_stream(et::cuda<0>);  // where the timing events go
    add("CG iteration", size, "etensor, captured", bytes, time([&] { graph.replay(on); }) / batch, true,
        "graph of " + std::to_string(graph.kernels()) + " kernels for " + std::to_string(batch) + " iterations");
    // the hand-fused three kernels
    Grid<2> hx = et::zeros<float>(et::cuda<0>, {side, side}), hr = b0.clone(), hp = b0.clone(),
            hap = et::zeros<float>(et::cuda<0>, {side, side});
    Grid<1> scalars = et::zeros<float>(et::cuda<0>, {4});  // rr[0], rr[1], pap, unused
    float* sc = scalars.data();
    const int blocks = et::device_properties(0).multiprocessors * 8;
    const auto hand_reset = [&] {
      hx = 0.0f, hap = 0.0f, scalars = 0.0f;
      hr.copy_(b0), hp.copy_(b0);
      scalars(0) = et::sum(hr * hr);
    };
    const auto hand_run = [&](cudaStream_t s) {
      for (int k = 0; k < batch; ++k) {
        float* rr_cur = sc + k % 2;
        float* rr_nxt = sc + (k + 1) % 2;
        hpc::cg_stencil_dot<<<blocks, 256, 0, s>>>(hp.data(), hap.data(), sc + 2, rr_nxt, n);
        hpc::cg_update_dot<<<blocks, 256, 0, s>>>(hx.data(), hr.data(), hp.data(), hap.data(), rr_cur, sc + 2, rr_nxt, total);
        hpc::cg_direction<<<blocks, 256, 0, s>>>(hp.data(), hr.data(), rr_cur, rr_nxt, sc + 2, total);
      }
    };
    hand_reset();
    hand_run(bench::stream());
    const bool ok = bench::compare_on_device(hx.data(), x_etensor.data(), total, 1e-3).ok();
    add("CG iteration", size, "hand fused, eager", bytes, time([&] { hand_run(bench::stream()); }) / batch, ok);
    cudaGraph_t hand_graph;
    cudaGraphExec_t hand_exec;
    ET_CUDA_CHECK(cudaStreamBeginCapture(stream.native(), cudaStreamCaptureModeThreadLocal));
    hand_run(stream.native());
    ET_CUDA_CHECK(cudaStreamEndCapture(stream.native(), &hand_graph));
    ET_CUDA_CHECK(cudaGraphInstantiate(&hand_exec, hand_graph, 0));
    add("CG iteration", size, "hand fused, captured", bytes,
        time([&] { ET_CUDA_CHECK(cudaGraphLaunch(hand_exec, bench::stream())); }) / batch);
    ET_CUDA_CHECK(cudaStreamSynchronize(bench::stream()));
    cudaGraphExecDestroy(hand_exec);
    cudaGraphDestroy(hand_graph);
  }

  int report(const std::string& json_path, const et::DeviceProperties& device) const {
    bool ok = true;
    std::printf("\n%-24s %-8s %-28s %10s %9s %7s  %s\n", "workload", "size", "variant", "us", "GB/s", "% copy", "note");
    for (const Row& r : rows_) {
      const double gbs = r.bytes / r.us / 1e3;
      std::printf("%-24s %-8s %-28s %10.1f %9.1f %6.1f%%  %s%s\n", r.workload.c_str(), r.size.c_str(), r.variant.c_str(),
                  r.us, gbs, 100.0 * gbs / copy_gbs_, r.note.c_str(), r.ok ? "" : "  CHECK FAILED");
      ok = ok && r.ok;
    }
    if (json_path.empty()) return ok ? 0 : 1;
    std::ofstream out(json_path);
    out << "{\n  \"benchmark\": \"hpc\",\n  \"device\": " << json_string(device.name) << ",\n  \"copy_gbs\": " << copy_gbs_
        << ",\n  \"rows\": [\n";
    for (std::size_t k = 0; k < rows_.size(); ++k) {
      const Row& r = rows_[k];
      out << "    {\"workload\": " << json_string(r.workload) << ", \"size\": " << json_string(r.size)
          << ", \"variant\": " << json_string(r.variant) << ", \"bytes\": " << r.bytes << ", \"us\": " << r.us
          << ", \"percent_of_copy\": " << 100.0 * r.bytes / r.us / 1e3 / copy_gbs_ << ", \"ok\": " << (r.ok ? "true" : "false")
          << ", \"note\": " << json_string(r.note) << "}" << (k + 1 < rows_.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    std::printf("wrote %s\n", json_path.c_str());
    return ok ? 0 : 1;
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 20, n2 = 8192, n3 = 512;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (arg == "--n2" && i + 1 < argc) n2 = std::stoi(argv[++i]);
    else if (arg == "--n3" && i + 1 < argc) n3 = std::stoi(argv[++i]);
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--n2 N] [--n3 N] [--only TEXT]\n", argv[0]);
      return 2;
    }
  }
  try {
    return Hpc(reps, n2, n3, only).run(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_hpc: %s\n", e.what());
    return 1;
  }
}
