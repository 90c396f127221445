// Layer normalization as a transformer runs it, on GPT-2 small's rows (768 values) for a
// batch of 4 x 1024 tokens and of 32 x 1024, in float and bfloat16 (weight and bias float):
//
//   layer_norm          y = layer_norm(x, w, b)             x read, y written        2 tensors
//   add_layer_norm      h = x + r, y = layer_norm(h)        x, r read, h, y written  4
//   layer_norm backward dx, dw, db from x, dy (the saved     x, dy read, dx written   3
//                       mean and rstd)
//
// each beside its minimal traffic at the device-to-device copy bandwidth measured here (the
// limit). etensor runs through its public calls (forward) and its backend's backward, with
// the statistics its forward saved. y and dx are checked against doubles on the host for
// the first 64 rows; dw against doubles over all rows. bench/peers_transformer.py runs the
// same in PyTorch eager and torch.compile. Timing: bench::median_us (event pairs, median).
//
// Usage: et_bench_transformer [--json PATH] [--reps N]   (exit status 1 if a check fails)
#include <et/nn.hpp>

#include "common.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

struct Row {
  std::string workload, size;
  double bytes = 0, us = 0, limit_us = 0, error = 0;
  bool ok = true;
};

template <class T>
std::vector<double> host(const et::Tensor<T, 2, Gpu>& t, std::int64_t rows) {
  return et::eval(et::cast<double>(t.slice(0, 0, std::min(rows, t.size(0))))).to_vector();
}

/// The largest |got - want| over the first rows' layer_norm (want from x in double).
double forward_error(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w,
                     const std::vector<double>& b, std::int64_t cols) {
  double worst = 0;
  for (std::size_t r = 0; r * cols < x.size(); ++r) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += x[r * cols + j];
    mean /= double(cols);
    for (std::int64_t j = 0; j < cols; ++j) var += (x[r * cols + j] - mean) * (x[r * cols + j] - mean);
    const double rstd = 1.0 / std::sqrt(var / double(cols) + 1e-5);
    for (std::int64_t j = 0; j < cols; ++j)
      worst = std::max(worst, std::fabs(y[r * cols + j] - ((x[r * cols + j] - mean) * rstd * w[j] + b[j])));
  }
  return worst;
}

template <class T>
void measure(std::int64_t rows, std::int64_t cols, const char* type, double copy_gbs, int reps, std::vector<Row>& out) {
  const std::string size = std::to_string(rows) + "x" + std::to_string(cols) + " " + type;
  const double tensor = double(rows) * double(cols) * sizeof(T);
  const double tolerance = sizeof(T) == 2 ? 4e-2 : 1e-4;
  const auto x = et::eval(et::cast<T>(et::randn<float>(et::cuda<0>, {rows, cols}, 1)));
  const auto r = et::eval(et::cast<T>(et::randn<float>(et::cuda<0>, {rows, cols}, 2)));
  const auto dy = et::eval(et::cast<T>(et::randn<float>(et::cuda<0>, {rows, cols}, 3)));
  const auto w = et::eval(1.0f + 0.1f * et::randn<float>(et::cuda<0>, {cols}, 4));
  const auto b = et::eval(0.1f * et::randn<float>(et::cuda<0>, {cols}, 5));
  const auto wh = w.to_vector(), bh = b.to_vector();
  const std::vector<double> wd(wh.begin(), wh.end()), bd(bh.begin(), bh.end());
  et::NoGradGuard no_grad;
  et::Tensor<T, 2, Gpu> y;
  const double fwd = bench::median_us([&] { y = et::layer_norm(x, w, b); }, 5, reps);
  out.push_back({"layer_norm", size, 2 * tensor, fwd, 2 * tensor / copy_gbs / 1e3,
                 forward_error(host(x, 64), host(y, 64), wd, bd, cols)});
  et::LayerNormResidual<T, 2, Gpu> hy;
  const double res = bench::median_us([&] { hy = et::add_layer_norm(x, r, w, b); }, 5, reps);
  out.push_back({"add_layer_norm", size, 4 * tensor, res, 4 * tensor / copy_gbs / 1e3,
                 forward_error(host(hy.h, 64), host(hy.y, 64), wd, bd, cols)});
  // The backward through the backend, from the statistics a forward saved.
  using C = et::detail::compute_t<T>;
  const et::detail::LayerNormGeometry g{rows, cols, 1e-5};
  auto mean = et::empty<C>(et::cuda<0>, {rows}), rstd = et::empty<C>(et::cuda<0>, {rows});
  auto dx = et::empty<T>(et::cuda<0>, {rows, cols});
  auto dw = et::empty<float>(et::cuda<0>, {cols}), db = et::empty<float>(et::cuda<0>, {cols});
  layer_norm_forward(et::detail::backend<Gpu>, g,
                     et::detail::LayerNormForward<T, float, C>{x.data(), nullptr, w.data(), b.data(), nullptr,
                                                               y.data(), mean.data(), rstd.data()});
  const et::detail::LayerNormBackward<T, float, C> buffers{x.data(),  dy.data(), w.data(), mean.data(), rstd.data(),
                                                           nullptr,   dx.data(), dw.data(), db.data()};
  const double bwd = bench::median_us([&] { layer_norm_backward(et::detail::backend<Gpu>, g, buffers); }, 5, reps);
  // dbias against doubles over every row (the column sums' order and partials).
  const auto dyh = et::eval(et::cast<double>(dy)).to_vector();
  std::vector<double> db_want(std::size_t(cols), 0.0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) db_want[std::size_t(j)] += dyh[std::size_t(i * cols + j)];
  const auto dbh = db.to_vector();
  double db_error = 0, db_scale = 1;
  for (std::int64_t j = 0; j < cols; ++j) {
    db_error = std::max(db_error, std::fabs(dbh[std::size_t(j)] - db_want[std::size_t(j)]));
    db_scale = std::max(db_scale, std::fabs(db_want[std::size_t(j)]));
  }
  out.push_back({"layer_norm backward", size, 3 * tensor, bwd, 3 * tensor / copy_gbs / 1e3, db_error / db_scale});
  for (std::size_t k = out.size() - 3; k < out.size(); ++k) out[k].ok = out[k].error <= tolerance;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(3, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  if (!et::cuda_available()) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 77;
  }
  try {
    const double copy_gbs = bench::copy_bandwidth_gbs(reps);
    std::printf("device: %s; device-to-device copy %.0f GB/s\n\n%-22s %-18s %10s %10s %8s %10s  %s\n",
                et::device_properties(0).name.c_str(), copy_gbs, "workload", "size", "us", "limit us", "% copy",
                "error", "check");
    std::vector<Row> rows;
    for (const std::int64_t n : {4096, 32768}) {
      measure<float>(n, 768, "f32", copy_gbs, reps, rows);
      measure<et::bfloat16>(n, 768, "bf16", copy_gbs, reps, rows);
    }
    bool ok = true;
    for (const Row& r : rows) {
      std::printf("%-22s %-18s %10.1f %10.1f %7.1f%% %10.2e  %s\n", r.workload.c_str(), r.size.c_str(), r.us,
                  r.limit_us, 100.0 * r.limit_us / r.us, r.error, r.ok ? "ok" : "WRONG");
      ok = ok && r.ok;
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"benchmark\": \"transformer\", \"device\": " << bench::json_string(et::device_properties(0).name)
          << ", \"copy_gbs\": " << copy_gbs << ", \"ok\": " << (ok ? "true" : "false") << ", \"rows\": [";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << (i ? ", " : "") << "{\"workload\": " << bench::json_string(r.workload)
            << ", \"size\": " << bench::json_string(r.size) << ", \"bytes\": " << r.bytes << ", \"us\": " << r.us
            << ", \"limit_us\": " << r.limit_us << ", \"error\": " << r.error
            << ", \"ok\": " << (r.ok ? "true" : "false") << "}";
      }
      out << "]}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_transformer: %s\n", e.what());
    return 1;
  }
}
