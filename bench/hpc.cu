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
//
// etensor runs each twice: as it plans it (the rows path where every operand is consecutive
// along the last axis), and with the rows path off (the general strided path), so that the
// two stand side by side; every result is compared with the hand kernel's on the device.
// The hand kernels come in two shapes: `grid` (PolyBench/GPU's and RAJAPerf's
// straightforward one element a thread) and `rows` (etensor's rows launch written by hand).
// peers_hpc.py runs the same statements in PyTorch eager, torch.compile and CuPy.
//
// Usage: et_bench_hpc [--json PATH] [--reps N] [--n2 N] [--n3 N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"
#include "hpc_kernels.cuh"

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
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
  Hpc(int reps, int n2, int n3) : reps_(reps), n2_(n2), n3_(n3) {}

  int run(const std::string& json_path) {
    const et::DeviceProperties& device = et::device_properties(0);
    std::printf("device: %s\n", device.name.c_str());
    copy_limit();
    jacobi2d();
    conv2d9();
    conv3d15();
    heat3d();
    fdtd2d();
    return report(json_path, device);
  }

 private:
  int reps_, n2_, n3_;
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
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (arg == "--n2" && i + 1 < argc) n2 = std::stoi(argv[++i]);
    else if (arg == "--n3" && i + 1 < argc) n3 = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--n2 N] [--n3 N]\n", argv[0]);
      return 2;
    }
  }
  try {
    return Hpc(reps, n2, n3).run(json_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_hpc: %s\n", e.what());
    return 1;
  }
}
