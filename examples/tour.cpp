// A tour of etensor, one function per topic of docs/guide.md, whose code blocks are the
// regions marked [guide:...] here (scripts/check-guide keeps the two equal). It runs on
// the first GPU when there is one, else on the CPU, checks what each topic computes,
// and returns nonzero if any check fails.
// cumsum, sort and topk on a GPU use CUB, whose headers et.hpp includes only when asked
// (they cost about 6 s of compile time per file).
#define ET_WITH_CUB 1
#include <et/et.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <vector>

// Counts failed checks; the tour's exit status says whether there were any.
struct Checks {
  int failed = 0;
  void operator()(bool ok, const char* what) {
    std::printf("  %s %s\n", ok ? "ok    " : "FAILED", what);
    if (!ok) ++failed;
  }
};

// True when both have the same length and every element of `got` is within `tolerance`
// of the matching element of `expected`.
template <class T, class U>
bool all_close(const std::vector<T>& got, const std::vector<U>& expected, double tolerance = 1e-6) {
  if (got.size() != expected.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - static_cast<double>(expected[i])) <= tolerance)) return false;
  return true;
}

template <et::Device D>
void devices(D dev, Checks& check) {
  std::printf("devices\n");
  // [guide:devices]
  et::Tensor<float, 2, et::Cpu> host = et::ones<float>(et::cpu, {2, 3});  // in host memory
  et::Tensor<float, 2, D> here = et::ones<float>(dev, {2, 3});            // on D: et::Cuda<0> or et::Cpu
  std::printf("one tensor on %s, one on %s\n", et::device_name<et::Cpu>.c_str(), et::device_name<D>.c_str());
  // auto bad = host + here;  // with D = et::Cuda<0>: a compile error, see below
  et::Tensor<float, 2, D> sum = host.to(dev) + here;  // copy across explicitly, then add on D
  // [guide:end]
  check(sum.to_vector() == std::vector<float>(6, 2.0f), "host.to(dev) + here is 2 everywhere");
}

template <et::Device D>
void creation(D dev, Checks& check) {
  std::printf("creation\n");
  // [guide:creation]
  auto z = et::zeros<float>(dev, {2, 3});                 // et::Tensor<float, 2, D>, all 0
  auto o = et::ones<double>(dev, {4});                    // et::Tensor<double, 1, D>
  auto f = et::full<std::int32_t>(dev, {2, 2}, 7);        // every element 7
  auto e = et::empty<float>(dev, {1000});                 // uninitialized: write before reading
  auto r = et::arange<std::int64_t>(dev, 5);              // 0 1 2 3 4
  auto s = et::arange<float>(dev, 0.0, 1.0, 0.25);        // 0 0.25 0.5 0.75 (end excluded)
  auto l = et::linspace<float>(dev, -1.0, 1.0, 5);        // -1 -0.5 0 0.5 1 (both ends included)
  auto u = et::rand<float>(dev, {3, 3}, /*seed=*/1);      // uniform on [0, 1)
  auto g = et::randn<float>(dev, {3, 3}, /*seed=*/1);     // standard normal
  auto v = et::from_vector(dev, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // host data, row-major
  // v.shape() is et::Shape<2>{2, 3} (a std::array), v.numel() 6, v.strides() {3, 1}
  // [guide:end]
  e = 0.0f;
  check(all_close(z.to_vector(), std::vector<float>(6, 0.0f)) && all_close(o.to_vector(), std::vector<double>(4, 1.0)) &&
            all_close(f.to_vector(), std::vector<int>(4, 7)) && all_close(e.to_vector(), std::vector<float>(1000, 0.0f)),
        "zeros, ones, full, empty");
  check(all_close(r.to_vector(), std::vector<int>{0, 1, 2, 3, 4}) && all_close(s.to_vector(), std::vector<float>{0, 0.25, 0.5, 0.75}) &&
            all_close(l.to_vector(), std::vector<float>{-1, -0.5, 0, 0.5, 1}),
        "arange and linspace");
  bool in_range = true;
  for (float x : u.to_vector()) in_range = in_range && x >= 0.0f && x < 1.0f;
  check(in_range, "rand is in [0, 1)");
  check(g.to_vector() == et::randn<float>(et::cpu, {3, 3}, 1).to_vector(), "randn gives the same bits as on the CPU");
  check(v.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6} && v.shape() == et::Shape<2>{2, 3} && v.numel() == 6 &&
            v.strides() == et::Shape<2>{3, 1},
        "from_vector");
}

template <et::Device D>
void crossing(D dev, Checks& check) {
  std::printf(".to()\n");
  // [guide:to]
  const auto host = et::randn<float>(et::cpu, {2, 2}, /*seed=*/3);
  const auto there = host.to(dev);             // et::Tensor<float, 2, D>: a copy when D is a GPU
  const auto back = et::to<et::Cpu>(there);    // the same as there.to(et::cpu)
  const auto same = host.to(et::cpu);          // to its own device: the same storage, no copy
  const auto alias = host;                     // copying a handle shares the storage (as in PyTorch)
  const auto copy = host.clone();              // clone() copies the elements
  const std::vector<float> values = there.to_vector();  // any device -> host, row-major
  // [guide:end]
  check(back.to_vector() == host.to_vector() && values == host.to_vector(), "a round trip keeps every bit");
  check(same.data() == host.data() && alias.data() == host.data() && copy.data() != host.data(),
        "to(own device) and handle copies share storage; clone() does not");
}

template <et::Device D>
void expressions(D dev, Checks& check) {
  std::printf("fused expressions\n");
  const auto x = et::randn<float>(dev, {1000}, /*seed=*/4);
  const auto y = et::rand<float>(dev, {1000}, /*seed=*/5);
  // [guide:expressions]
  auto e = 2.0f * x + et::tanh(y) * et::exp(-x * x);  // an expression: nothing has run yet
  et::Tensor<float, 1, D> z = e;                      // ONE kernel: reads x and y once, writes z
  z += et::sigmoid(x);                                // one more, in z's storage
  z = et::where(x > 0.0f, z, 0.0f);                   // comparisons give bool masks
  auto w = et::eval(et::clamp(z, -1.0f, 1.0f));       // eval(): into a new tensor
  // [guide:end]
  const auto xs = x.to_vector(), ys = y.to_vector();
  std::vector<double> expected(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x_i = xs[i];
    const double value = 2 * x_i + std::tanh(ys[i]) * std::exp(-x_i * x_i) + 1 / (1 + std::exp(-x_i));
    expected[i] = x_i > 0 ? std::min(std::max(value, -1.0), 1.0) : 0.0;
  }
  check(all_close(w.to_vector(), expected, 1e-5), "one fused chain against a double-precision loop");
}

template <et::Device D>
void broadcasting(D dev, Checks& check) {
  std::printf("broadcasting\n");
  // [guide:broadcasting]
  const auto m = et::ones<float>(dev, {4, 3});
  const auto row = et::arange<float>(dev, 3);               // [3]: repeats down the 4 rows
  const auto col = et::arange<float>(dev, 4).unsqueeze(1);  // [4, 1]: repeats across the 3 columns
  et::Tensor<float, 2, D> table = m + 10.0f * row + col;    // [4, 3]: table[i, j] = 1 + 10 j + i
  et::Tensor<float, 2, D> outer = col * row;                // [4, 1] with [3] -> [4, 3]
  // m + et::ones<float>(dev, {4}) throws et::ShapeError: [4, 3] and [4] do not broadcast
  // [guide:end]
  std::vector<float> expected_table, expected_outer;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 3; ++j) {
      expected_table.push_back(1.0f + 10.0f * j + i);
      expected_outer.push_back(float(i * j));
    }
  }
  check(table.to_vector() == expected_table && outer.to_vector() == expected_outer, "row, column and outer product");
}

template <et::Device D>
void views(D dev, Checks& check) {
  std::printf("views\n");
  // [guide:views]
  auto x = et::arange<float>(dev, 12).view({3, 4});  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  auto xt = x.transpose(0, 1);                       // [4, 3]: strides swapped, nothing copied
  auto even_columns = x.slice(1, 0, 4, 2);           // x[:, 0:4:2] -> [3, 2]
  auto last_row = x.select(0, -1);                   // x[-1] -> [4]
  auto column = x.select(1, 2).unsqueeze(1);         // x[:, 2] as [3, 1]
  x.slice(0, 0, 1) = 0.0f;                           // writes through: row 0 of x is now 0
  x.select(1, 3) += 100.0f;                          // column 3 of x, in place
  auto packed = xt.contiguous();                     // a compact copy: xt is not contiguous
  auto flat = xt.reshape({12});                      // reshape() copies when no view can do it
  // [guide:end]
  check(x.to_vector() == std::vector<float>{0, 0, 0, 100, 4, 5, 6, 107, 8, 9, 10, 111}, "writes through views");
  check(even_columns.to_vector() == std::vector<float>{0, 0, 4, 6, 8, 10} &&
            last_row.to_vector() == std::vector<float>{8, 9, 10, 111} &&
            column.to_vector() == std::vector<float>{0, 6, 10},
        "views see the writes");
  check(!xt.is_contiguous() && packed.is_contiguous() && packed.to_vector() == xt.to_vector() &&
            flat.to_vector() == std::vector<float>{0, 4, 8, 0, 5, 9, 0, 6, 10, 100, 107, 111},
        "contiguous() and reshape() of a transposed view");
}

template <et::Device D>
void reductions(D dev, Checks& check) {
  std::printf("reductions\n");
  const auto x = et::randn<float>(dev, {64, 10}, /*seed=*/6);
  const auto y = et::randn<float>(dev, {64, 10}, /*seed=*/7);
  // [guide:reductions]
  auto total = et::sum(x);                          // a 0-d tensor on D
  const float average = et::mean(x).item();         // .item(): its one value, on the host
  auto row_max = et::max(x, 1);                     // [64]: over axis 1
  auto col_mean = et::mean(x, 0, true);             // [1, 10]: the axis kept (keepdim)
  auto centered = et::eval(x - col_mean);           // broadcasts back over the rows
  auto squared = et::sum((x - y) * (x - y));        // fused: x - y is never stored
  const float distance = et::norm(x - y).item();    // sqrt of the same sum
  auto best = et::argmax(x, 1);                     // [64] of std::int64_t
  auto probabilities = et::softmax(x, 1);           // each row sums to 1
  // [guide:end]
  const auto xs = x.to_vector(), ys = y.to_vector();
  double sum = 0, distance_squared = 0, worst_max = 0, worst_softmax = 0;
  bool argmax_ok = true;
  const auto maxima = row_max.to_vector(), probs = probabilities.to_vector();
  const auto indices = best.to_vector();
  for (int i = 0; i < 64; ++i) {
    float largest = xs[i * 10];
    int where = 0;
    double row_sum = 0;
    for (int j = 0; j < 10; ++j) {
      sum += xs[i * 10 + j];
      distance_squared += std::pow(double(xs[i * 10 + j]) - ys[i * 10 + j], 2);
      if (xs[i * 10 + j] > largest) largest = xs[i * 10 + j], where = j;
      row_sum += probs[i * 10 + j];
    }
    worst_max = std::max(worst_max, double(std::abs(maxima[i] - largest)));
    worst_softmax = std::max(worst_softmax, std::abs(row_sum - 1));
    argmax_ok = argmax_ok && indices[i] == where;
  }
  check(std::abs(total.item() - sum) < 1e-3 && std::abs(average - sum / 640) < 1e-5, "sum and mean");
  check(std::abs(squared.item() - distance_squared) < 1e-2 && std::abs(distance - std::sqrt(distance_squared)) < 1e-4,
        "fused sum of squares and norm");
  check(worst_max == 0 && argmax_ok && worst_softmax < 1e-5, "max, argmax and softmax along rows");
  check(std::abs(et::sum(centered).item()) < 1e-3 && col_mean.size(0) == 1, "keepdim broadcasts back");
}

template <et::Device D>
void indexing(D dev, Checks& check) {
  std::printf("indexing, scans and sorting\n");
  const auto x = et::from_vector(dev, std::vector<float>{3, 1, 2, 9, 7, 8}, {2, 3});
  // [guide:indexing]
  auto picks = et::from_vector(dev, std::vector<std::int64_t>{1, 1, 0}, {3});
  auto rows = et::index_select(x, 0, picks);        // [3, 3]: rows 1, 1, 0
  auto firsts = et::gather(x, 1, et::zeros<std::int64_t>(dev, {2, 1}));  // [2, 1]: x[i][0]
  auto running = et::cumsum(x, 1);                   // [[3, 4, 6], [9, 16, 24]]
  auto [sorted, from] = et::sort(x, 1);              // values, and where each came from
  auto [best, where] = et::topk(x, 2, 1);            // the 2 largest per row, largest first
  auto backwards = et::flip(x, 1);                   // each row reversed
  // [guide:end]
  check(rows.to_vector() == std::vector<float>{9, 7, 8, 9, 7, 8, 3, 1, 2} &&
            firsts.to_vector() == std::vector<float>{3, 9},
        "index_select and gather");
  check(running.to_vector() == std::vector<float>{3, 4, 6, 9, 16, 24}, "cumsum along rows");
  check(sorted.to_vector() == std::vector<float>{1, 2, 3, 7, 8, 9} &&
            from.to_vector() == std::vector<std::int64_t>{1, 2, 0, 1, 2, 0},
        "sort with positions");
  check(best.to_vector() == std::vector<float>{3, 2, 9, 8} && where.to_vector() == std::vector<std::int64_t>{0, 2, 0, 2},
        "topk");
  check(backwards.to_vector() == std::vector<float>{2, 1, 3, 8, 7, 9}, "flip");
}

template <et::Device D>
void dtypes(D dev, Checks& check) {
  std::printf("dtypes\n");
  // [guide:dtypes]
  const auto i = et::arange<std::int32_t>(dev, 6);            // 0 1 2 3 4 5 (int32)
  static_assert(std::is_same_v<decltype(et::eval(i / 2)), et::Tensor<float, 1, D>>);  // true division
  et::Tensor<float, 1, D> q = i / 2;                          // 0 0.5 1 1.5 2 2.5
  auto h = et::eval(et::cast<et::half>(q) * 2.0 + 1.0);       // half: a scalar does not widen a tensor
  static_assert(std::is_same_v<decltype(h), et::Tensor<et::half, 1, D>>);
  const float total = et::sum(h).item();                      // 16-bit floats accumulate in float
  auto mask = et::eval(i > 2);                                // et::Tensor<bool, 1, D>
  auto squares = et::eval(et::cast<std::int64_t>(i) * i);     // int64 * int32 -> int64
  // et::Tensor<std::int32_t, 1, D> bad = q;  // compile error: would truncate; use et::cast
  // [guide:end]
  check(all_close(q.to_vector(), std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5}) &&
            all_close(h.to_vector(), std::vector<float>{1, 2, 3, 4, 5, 6}) && total == 21.0f,
        "int32 / int, half arithmetic and its sum");
  check(mask.to_vector() == std::vector<bool>{false, false, false, true, true, true} &&
            squares.to_vector() == std::vector<std::int64_t>{0, 1, 4, 9, 16, 25},
        "bool masks and int64 products");
}

template <et::Device D>
void linear_algebra(D dev, Checks& check) {
  std::printf("matmul\n");
  const auto x = et::randn<float>(dev, {32, 64}, /*seed=*/8);  // 32 inputs of 64 features
  const auto w = et::randn<float>(dev, {64, 16}, /*seed=*/9);  // a layer of 16 outputs
  const auto b = et::randn<float>(dev, {16}, /*seed=*/10);
  // [guide:matmul]
  et::Tensor<float, 2, D> y = et::matmul(x, w);                    // [32, 64] @ [64, 16]: one GEMM into y
  et::Tensor<float, 2, D> h = et::relu(et::matmul(x, w) + b);      // CUDA: one cuBLASLt call (bias + ReLU epilogue)
  et::Tensor<float, 2, D> g = et::gelu_tanh(et::matmul(x, w) + b); // likewise, GELU (tanh form) epilogue
  auto gram = et::eval(et::matmul(w.transpose(0, 1), w));          // [16, 16]; the transpose is a flag, not a copy
  auto batch = et::eval(et::matmul(et::randn<float>(dev, {8, 32, 64}, 11), w));  // [8, 32, 16]: w shared
  auto fast = et::eval(et::matmul(x, w, et::MathMode::tf32));     // per call: TF32 tensor cores (CUDA, float)
  {
    const et::MathModeGuard guard(et::MathMode::bf16);             // per scope and thread
    y = et::matmul(x, w);                                          // bf16 inputs, float accumulation
  }
  // [guide:end]
  const et::Tensor<float, 2, D> exact = et::matmul(x, w);
  const auto relu_of_sum = et::eval(et::relu(exact + b));
  const auto gelu_of_sum = et::eval(et::gelu_tanh(exact + b));
  // Entries of x @ w are about 8 in size; another GEMM algorithm rounds differently.
  check(et::max(et::abs(h - relu_of_sum)).item() < 1e-3f && et::max(et::abs(g - gelu_of_sum)).item() < 1e-3f,
        "fused bias + ReLU / GELU match the unfused expressions");
  check(et::max(et::abs(gram - gram.transpose(0, 1))).item() < 1e-5f * et::norm(gram).item() && batch.size(0) == 8 &&
            batch.size(2) == 16,
        "a Gram matrix from a transposed view, a batched product");
  // TF32 and bf16 keep 10 and 7 mantissa bits of each input: relative errors near 1e-3 and 1e-2.
  const float scale = et::norm(exact).item();
  check(et::norm(fast - exact).item() < 5e-3f * scale && et::norm(y - exact).item() < 3e-2f * scale,
        "reduced-precision math modes stay close to exact");
}

template <et::Device D>
void convolution(D dev, Checks& check) {
  std::printf("conv2d and pooling on %s\n", et::device_name<D>.c_str());
  // [guide:conv]
  const auto images = et::rand<float>(dev, {2, 3, 16, 16}, /*seed=*/12);  // NCHW: 2 images, 3 channels
  const auto filters = et::randn<float>(dev, {8, 3, 3, 3}, /*seed=*/13);  // 8 filters of 3 x 3 x 3
  const auto bias = et::zeros<float>(dev, {8});
  auto features = et::conv2d(images, filters, bias, {.padding = {1, 1}});  // [2, 8, 16, 16]; cuDNN on CUDA
  auto pooled = et::max_pool2d(et::eval(et::relu(features)), {.kernel = {2, 2}});  // [2, 8, 8, 8]
  // A 3 x 3 box blur of each channel, as a depthwise convolution (groups = channels) ...
  const auto box = et::full<float>(dev, {3, 1, 3, 3}, 1.0 / 9);
  auto blurred = et::conv2d(images, box, {.padding = {1, 1}, .groups = 3, .allow_tf32 = false});
  // ... equals 3 x 3 average pooling with stride 1 (the zero padding counts, as in PyTorch)
  auto averaged = et::avg_pool2d(images, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
  // [guide:end]
  check(features.shape() == et::Shape<4>{2, 8, 16, 16} && pooled.shape() == et::Shape<4>{2, 8, 8, 8} &&
            et::min(pooled).item() >= 0.0f,
        "conv2d with bias, then ReLU and max pooling");
  // Equal up to rounding: cuDNN may pick a Winograd or FFT algorithm, exact only in exact arithmetic.
  check(et::max(et::abs(blurred - averaged)).item() < 1e-5f, "depthwise box filter equals average pooling");
}

template <et::Device D>
void errors(D dev, Checks& check) {
  std::printf("errors\n");
  bool shape_error = false, out_of_memory = false, missing_device = false;
  // [guide:errors]
  try {
    auto bad = et::ones<float>(dev, {4, 3}) + et::ones<float>(dev, {4});  // thrown when the expression is built
  } catch (const et::ShapeError& e) {
    std::printf("%s\n", e.what());
    shape_error = true;
  }
  try {
    auto huge = et::empty<float>(dev, {1 << 24, 1 << 24});  // 2^48 floats: 1 PiB
  } catch (const et::OutOfMemory& e) {
    std::printf("%s\n", e.what());  // also as numbers: requested_bytes(), free_bytes(), total_bytes()
    out_of_memory = true;           // nothing was half-allocated: the program goes on
  }
  try {
    auto missing = et::zeros<float>(et::cuda<15>, {4});  // a GPU this machine does not have
  } catch (const et::Error& e) {                         // the base class of every etensor error
    std::printf("%s\n", e.what());
    missing_device = true;
  }
  // [guide:end]
  check(shape_error, "a shape mismatch throws et::ShapeError");
  check(out_of_memory, "an impossible allocation throws et::OutOfMemory");
  check(missing_device || et::device_count() > 15, "a missing device throws et::Error");
  check(et::sum(et::ones<float>(dev, {1000})).item() == 1000.0f, "the device still works afterwards");
}

#if defined(__CUDACC__)
// Two GPUs in one program: each device is a type, and data moves only through .to().
// (Tensors on a GPU run kernels, which only nvcc compiles: hence the #if.)
void two_gpus(Checks& check) {
  std::printf("two GPUs\n");
  // [guide:two-gpus]
  const auto a = et::randn<float>(et::cuda<0>, {1 << 20}, /*seed=*/14);
  const auto b = a.to(et::cuda<1>);                 // GPU to GPU: a peer copy
  et::Tensor<float, 1, et::Cuda<1>> c = b * 2.0f;    // runs on cuda:1
  // auto bad = a + b;                              // compile error: cuda:0 and cuda:1 cannot meet
  et::Tensor<float, 1, et::Cuda<0>> d = a + c.to(et::cuda<0>);  // back on cuda:0
  // [guide:end]
  // Exact, element by element: copies move bits. (Not max|d - 3a| == 0: a fused kernel
  // may compute d - 3a as one fma, which shows d's own rounding error of half an ulp.)
  const std::vector<float> av = a.to_vector(), dv = d.to_vector();
  bool exact = true;
  for (std::size_t i = 0; i < av.size(); ++i) exact = exact && dv[i] == av[i] + 2.0f * av[i];
  check(exact, "a + 2a across two GPUs");
}
#endif

// Every topic on one device.
template <et::Device D>
void tour(D dev, Checks& check) {
  devices(dev, check);
  creation(dev, check);
  crossing(dev, check);
  expressions(dev, check);
  broadcasting(dev, check);
  views(dev, check);
  reductions(dev, check);
  indexing(dev, check);
  dtypes(dev, check);
  linear_algebra(dev, check);
#if defined(__CUDACC__) && !defined(ET_WITH_CUDNN)
  convolution(et::cpu, check);  // this build found no cuDNN: convolutions run on the CPU only
#else
  convolution(dev, check);
#endif
  errors(dev, check);
}

int main() {
  std::printf("etensor tour: %d CUDA device(s)\n", et::device_count());
  Checks check;
  // [guide:try-gpu]
  et::try_gpu([&](auto dev) {  // et::cuda<0> when a GPU is visible, else et::cpu
    std::printf("running on %s\n", et::device_name<decltype(dev)>.c_str());
    tour(dev, check);
  });
  // [guide:end]
#if defined(__CUDACC__)
  if (et::device_count() >= 2) two_gpus(check);
#endif
  std::printf("%s: %d check(s) failed\n", check.failed ? "FAILED" : "ok", check.failed);
  return check.failed ? 1 : 0;
}
