// Convolution and pooling on the CPU against double-precision loops written from the
// definitions (tests/common/conv_reference.hpp), on random shapes: batch 1, odd sizes,
// strides 2 and 3, padding, dilation 2, groups (depthwise too), 1x1, 3x3 and 5x3 kernels,
// with and without bias, nchw and nhwc, every element type. The gradients are also checked
// by the adjoint identities <conv(x), dy> = <x, dx> = <w, dw>, which no reference loop
// enters. Then which path ran (oneDNN for float where etensor has it; never for double),
// the output-shape arithmetic and every error message.
#include "../common/conv_reference.hpp"
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <array>
#include <cmath>
#include <string>
#include <vector>

using Catch::Matchers::Message;
using test::as_doubles;
using test::ConvGeometry;
using test::PoolGeometry;

namespace {

/// Rounds double data to T (so the reference sees exactly the inputs the library sees).
template <class T>
std::vector<T> rounded(const std::vector<double>& values) {
  std::vector<T> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(static_cast<T>(v));
  return out;
}

/// Checks every element against the reference, to `tolerance` times the reference's
/// largest magnitude (at least 1).
void check_against(const std::vector<double>& got, const std::vector<double>& want, double tolerance) {
  test::check_scaled_close(got, want, tolerance, "element differs from the double-precision reference");
}

/// A tensor of `layout` from logical (nchw-ordered) data.
template <class T>
et::Tensor<T, 4, et::Cpu> make(const std::vector<double>& nchw, const et::Shape<4>& shape, et::Layout layout) {
  const bool nhwc = layout == et::Layout::nhwc;
  return et::from_vector(et::cpu, rounded<T>(nhwc ? test::nchw_to_nhwc(nchw, shape) : nchw),
                         nhwc ? test::nhwc_shape(shape) : shape);
}

/// A tensor's elements back in logical (nchw) order, as double.
template <class T>
std::vector<double> logical(const et::Tensor<T, 4, et::Cpu>& t, et::Layout layout) {
  const auto values = as_doubles(t.to_vector());
  return layout == et::Layout::nhwc ? test::nhwc_to_nchw(values, t.shape()) : values;
}

const std::vector<ConvGeometry> conv_cases = {
    // n  c  h   w  k  r  s  stride   padding  dilation  groups  bias
    {1, 3, 7, 9, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},     // batch 1, odd extents
    {2, 4, 11, 8, 6, 5, 3, {2, 1}, {2, 1}, {1, 1}, 2, false},   // 5x3, stride 2, groups
    {3, 6, 9, 10, 6, 3, 3, {3, 3}, {0, 1}, {2, 2}, 3, true},    // stride 3, dilation 2
    {2, 5, 6, 7, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 5, true},     // depthwise
    {4, 8, 5, 7, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, false},    // 1x1: no unrolling
    {1, 4, 5, 5, 8, 1, 1, {2, 2}, {1, 1}, {1, 1}, 2, true},     // 1x1 with stride and padding
    {3, 2, 8, 8, 4, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, true},     // batch 3, stride 2
    {2, 4, 3, 5, 2, 3, 5, {1, 1}, {0, 0}, {1, 1}, 1, false},    // kernel as large as the input
    {2, 64, 20, 20, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true},  // nhwc runs in several pixel tiles
};

template <class T>
void check_convolution(const ConvGeometry& cc, et::Layout layout) {
  CAPTURE(cc.describe(), layout == et::Layout::nhwc ? "nhwc" : "nchw");
  const auto x_data = as_doubles(rounded<T>(test::uniform(cc.input_shape_nchw(), 11)));
  const auto w_data = as_doubles(rounded<T>(test::uniform(cc.weight_shape_nchw(), 12)));
  const auto b_data = as_doubles(rounded<T>(test::uniform(std::array<std::int64_t, 1>{cc.k}, 13)));
  const et::Conv2dOptions options = cc.options(layout);
  const auto x = make<T>(x_data, cc.input_shape_nchw(), layout);
  const auto w = make<T>(w_data, cc.weight_shape_nchw(), layout);
  const auto b = et::from_vector(et::cpu, rounded<T>(b_data), {cc.k});

  SECTION("forward") {
    const auto y = cc.bias ? et::conv2d(x, w, b, options) : et::conv2d(x, w, options);
    CHECK(y.shape() == (layout == et::Layout::nhwc ? test::nhwc_shape(cc.output_shape_nchw()) : cc.output_shape_nchw()));
    CHECK(y.is_contiguous());
    check_against(logical(y, layout), test::conv_forward(cc, x_data, w_data, cc.bias ? &b_data : nullptr),
                  test::conv_tolerance<T>());
  }
  const auto dy_data = as_doubles(rounded<T>(test::uniform(cc.output_shape_nchw(), 14)));
  const auto dy = make<T>(dy_data, cc.output_shape_nchw(), layout);
  SECTION("backward data") {
    const auto dx = et::conv2d_backward_data(dy, w, x.shape(), options);
    CHECK(dx.shape() == x.shape());
    check_against(logical(dx, layout), test::conv_backward_data(cc, dy_data, w_data), test::conv_tolerance<T>());
  }
  SECTION("backward filter") {
    const auto dw = et::conv2d_backward_filter(x, dy, w.shape(), options);
    CHECK(dw.shape() == w.shape());
    check_against(logical(dw, layout), test::conv_backward_filter(cc, x_data, dy_data), test::conv_tolerance<T>());
  }
}

const std::vector<PoolGeometry> pool_cases = {
    // n  c  h  w  kernel   stride   padding  count_include_pad
    {1, 3, 7, 9, {2, 2}, {0, 0}, {0, 0}, true},    // stride = kernel; odd extents round down
    {2, 4, 8, 7, {3, 3}, {2, 2}, {1, 1}, true},    // overlapping windows with padding
    {2, 2, 9, 6, {3, 2}, {1, 2}, {1, 0}, false},   // padding excluded from the average
    {3, 5, 5, 5, {5, 5}, {1, 1}, {2, 2}, false},   // windows mostly padding
    {1, 2, 4, 6, {1, 1}, {1, 1}, {0, 0}, true},    // 1x1: the identity
    {2, 3, 10, 10, {3, 3}, {3, 3}, {0, 0}, true},  // stride 3 drops the last row and column
};

template <class T>
void check_pooling(const PoolGeometry& pc, et::Layout layout) {
  CAPTURE(pc.describe(), layout == et::Layout::nhwc ? "nhwc" : "nchw");
  // Distinct values, so that every window has one maximum (ties are tested on their own).
  const auto x_data = as_doubles(rounded<T>(test::distinct(pc.input_shape_nchw(), 21)));
  const auto dy_data = as_doubles(rounded<T>(test::uniform(pc.output_shape_nchw(), 22)));
  const et::Pool2dOptions options = pc.options(layout);
  const auto x = make<T>(x_data, pc.input_shape_nchw(), layout);
  const auto dy = make<T>(dy_data, pc.output_shape_nchw(), layout);
  const auto y_shape = layout == et::Layout::nhwc ? test::nhwc_shape(pc.output_shape_nchw()) : pc.output_shape_nchw();

  const auto y = et::max_pool2d(x, options);
  CHECK(y.shape() == y_shape);
  check_against(logical(y, layout), test::max_pool_forward(pc, x_data), 0);
  const auto a = et::avg_pool2d(x, options);
  CHECK(a.shape() == y_shape);
  check_against(logical(a, layout), test::avg_pool_forward(pc, x_data), test::conv_tolerance<T>());
  const auto dx_max = et::max_pool2d_backward(dy, x, y, options);
  CHECK(dx_max.shape() == x.shape());
  check_against(logical(dx_max, layout), test::max_pool_backward(pc, x_data, dy_data), test::conv_tolerance<T>());
  const auto dx_avg = et::avg_pool2d_backward(dy, x.shape(), options);
  CHECK(dx_avg.shape() == x.shape());
  check_against(logical(dx_avg, layout), test::avg_pool_backward(pc, dy_data), test::conv_tolerance<T>());
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

TEST_CASE("conv2d and its gradients match double-precision loops", "[conv]") {
  const auto cc = GENERATE(from_range(conv_cases));
  const auto layout = GENERATE(et::Layout::nchw, et::Layout::nhwc);
  SECTION("double") { check_convolution<double>(cc, layout); }
  SECTION("float") { check_convolution<float>(cc, layout); }
  SECTION("half") { check_convolution<et::half>(cc, layout); }
  SECTION("bfloat16") { check_convolution<et::bfloat16>(cc, layout); }
}

TEST_CASE("conv2d gradients satisfy the adjoint identities", "[conv]") {
  // <conv(x, w), dy> = <x, backward_data(dy, w)> = <w, backward_filter(x, dy)>: the
  // gradients are the adjoints of the forward map, checked without any reference loop.
  const auto cc = GENERATE(from_range(conv_cases));
  const auto layout = GENERATE(et::Layout::nchw, et::Layout::nhwc);
  CAPTURE(cc.describe());
  const et::Conv2dOptions options = cc.options(layout);
  const auto x = make<double>(test::uniform(cc.input_shape_nchw(), 31), cc.input_shape_nchw(), layout);
  const auto w = make<double>(test::uniform(cc.weight_shape_nchw(), 32), cc.weight_shape_nchw(), layout);
  const auto y = et::conv2d(x, w, options);
  const auto dy = make<double>(test::uniform(cc.output_shape_nchw(), 33), cc.output_shape_nchw(), layout);
  const double forward = dot(y.to_vector(), dy.to_vector());
  const double via_data = dot(x.to_vector(), et::conv2d_backward_data(dy, w, x.shape(), options).to_vector());
  const double via_filter = dot(w.to_vector(), et::conv2d_backward_filter(x, dy, w.shape(), options).to_vector());
  CHECK(via_data == Approx(forward).epsilon(1e-12).margin(1e-12));
  CHECK(via_filter == Approx(forward).epsilon(1e-12).margin(1e-12));
}

TEST_CASE("conv2d reads any strides and an empty batch", "[conv]") {
  const ConvGeometry cc{2, 4, 6, 5, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}, 2, true};
  const auto x_data = test::uniform(cc.input_shape_nchw(), 41);
  const auto w_data = test::uniform(cc.weight_shape_nchw(), 42);
  const auto b_data = test::uniform(std::array<std::int64_t, 1>{cc.k}, 43);
  const auto want = test::conv_forward(cc, x_data, w_data, &b_data);
  const auto w = et::from_vector(et::cpu, w_data, cc.weight_shape_nchw());
  const auto b = et::from_vector(et::cpu, b_data, {cc.k});
  SECTION("a permuted view: nhwc memory read as nchw") {
    const auto x_nhwc = et::from_vector(et::cpu, test::nchw_to_nhwc(x_data, cc.input_shape_nchw()),
                                        test::nhwc_shape(cc.input_shape_nchw()));
    const auto x = x_nhwc.permute({0, 3, 1, 2});
    REQUIRE_FALSE(x.is_contiguous());
    check_against(et::conv2d(x, w, b, cc.options(et::Layout::nchw)).to_vector(), want, 1e-12);
  }
  SECTION("a stepped slice of a larger batch") {
    std::vector<double> padded(x_data.size() * 2, 99.0);  // images 0, 2 are x; 1, 3 are noise
    const std::size_t image = x_data.size() / 2;
    std::copy(x_data.begin(), x_data.begin() + long(image), padded.begin());
    std::copy(x_data.begin() + long(image), x_data.end(), padded.begin() + long(2 * image));
    const auto big = et::from_vector(et::cpu, padded, {4, cc.c, cc.h, cc.w});
    check_against(et::conv2d(big.slice(0, 0, 4, 2), w, b, cc.options(et::Layout::nchw)).to_vector(), want, 1e-12);
  }
  SECTION("an empty batch gives empty outputs and a zero weight gradient") {
    const auto x0 = et::zeros<double>(et::cpu, {0, cc.c, cc.h, cc.w});
    const auto y0 = et::conv2d(x0, w, b, cc.options(et::Layout::nchw));
    CHECK(y0.shape() == et::Shape<4>{0, cc.k, cc.h, cc.w});
    const auto dw = et::conv2d_backward_filter(x0, y0, w.shape(), cc.options(et::Layout::nchw));
    for (double v : dw.to_vector()) CHECK(v == 0.0);
    CHECK(et::max_pool2d(x0, {.kernel = {2, 2}}).shape() == et::Shape<4>{0, cc.c, 3, 2});
  }
}

namespace {

/// Convolution passes and pooling passes the CPU ran through oneDNN so far.
std::array<std::int64_t, 2> dnnl_runs() {
  const auto& counters = et::detail::dnnl_counters();
  return {counters.convolutions.load(), counters.poolings.load()};
}

/// A convolution (forward, both gradients) and the four pooling passes on T, in `layout`.
template <class T>
void run_conv_and_pool(et::Layout layout) {
  const ConvGeometry cc{2, 16, 8, 8, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true};
  const auto x = make<T>(test::uniform(cc.input_shape_nchw(), 51), cc.input_shape_nchw(), layout);
  const auto w = make<T>(test::uniform(cc.weight_shape_nchw(), 52), cc.weight_shape_nchw(), layout);
  const auto b = et::from_vector(et::cpu, rounded<T>(test::uniform(std::array<std::int64_t, 1>{cc.k}, 53)), {cc.k});
  const auto y = et::conv2d(x, w, b, cc.options(layout));
  (void)et::conv2d_backward_data(y, w, x.shape(), cc.options(layout));
  (void)et::conv2d_backward_filter(x, y, w.shape(), cc.options(layout));
  const et::Pool2dOptions pool{.kernel = {2, 2}, .layout = layout};
  const auto m = et::max_pool2d(x, pool);
  (void)et::avg_pool2d(x, pool);
  (void)et::max_pool2d_backward(m, x, m, pool);
  (void)et::avg_pool2d_backward(m, x.shape(), pool);
}

}  // namespace

TEST_CASE("float convolution and pooling run through oneDNN when etensor has it; double never does", "[conv][dnnl]") {
  const auto layout = GENERATE(et::Layout::nchw, et::Layout::nhwc);
  CAPTURE(layout == et::Layout::nhwc ? "nhwc" : "nchw");
  const auto before = dnnl_runs();
  SECTION("float") {
    run_conv_and_pool<float>(layout);
#if defined(ET_DNNL_PRIMITIVES)
    CHECK(dnnl_runs() == std::array<std::int64_t, 2>{before[0] + 3, before[1] + 4});
#else
    CHECK(dnnl_runs() == before);
#endif
  }
  SECTION("double runs conv.hpp and pool.hpp") {
    run_conv_and_pool<double>(layout);
    CHECK(dnnl_runs() == before);
  }
  SECTION("max pooling over a NaN runs pool.hpp, which propagates it") {
    const auto x = et::from_vector(et::cpu, std::vector<float>{1, NAN, 5, 2},
                                   layout == et::Layout::nhwc ? et::Shape<4>{1, 2, 2, 1} : et::Shape<4>{1, 1, 2, 2});
    CHECK(std::isnan(et::max_pool2d(x, {.kernel = {2, 2}, .layout = layout}).item()));
    CHECK(dnnl_runs() == before);
  }
}

TEST_CASE("pooling and its gradients match double-precision loops", "[conv][pool]") {
  const auto pc = GENERATE(from_range(pool_cases));
  const auto layout = GENERATE(et::Layout::nchw, et::Layout::nhwc);
  SECTION("double") { check_pooling<double>(pc, layout); }
  SECTION("float") { check_pooling<float>(pc, layout); }
  SECTION("half") { check_pooling<et::half>(pc, layout); }
  SECTION("bfloat16") { check_pooling<et::bfloat16>(pc, layout); }
}

TEST_CASE("max pooling: ties, NaN and padding", "[conv][pool]") {
  SECTION("a tie sends the gradient to the first maximum in row-major order") {
    const auto x = et::full<float>(et::cpu, {1, 1, 2, 2}, 3.0f);
    const auto y = et::max_pool2d(x, {.kernel = {2, 2}});
    const auto dx = et::max_pool2d_backward(et::ones<float>(et::cpu, {1, 1, 1, 1}), x, y, {.kernel = {2, 2}});
    CHECK(dx.to_vector() == std::vector<float>{1, 0, 0, 0});
  }
  SECTION("NaN propagates, and its gradient goes to it") {
    const auto x = et::from_vector(et::cpu, std::vector<float>{1, NAN, 5, 2}, {1, 1, 2, 2});
    const auto y = et::max_pool2d(x, {.kernel = {2, 2}});
    CHECK(std::isnan(y.item()));
    const auto dx = et::max_pool2d_backward(et::ones<float>(et::cpu, {1, 1, 1, 1}), x, y, {.kernel = {2, 2}});
    CHECK(dx.to_vector() == std::vector<float>{0, 1, 0, 0});
  }
  SECTION("padding never wins, even over negative values") {
    const auto x = et::full<float>(et::cpu, {1, 1, 3, 3}, -2.0f);
    for (float v : et::max_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}).to_vector()) CHECK(v == -2.0f);
  }
}

TEST_CASE("output shapes of convolution and pooling", "[conv]") {
  CHECK(et::conv2d_output_shape({32, 128, 56, 56}, {128, 128, 3, 3}, {.padding = {1, 1}}) ==
        et::Shape<4>{32, 128, 56, 56});
  CHECK(et::conv2d_output_shape({2, 9, 10, 3}, {6, 3, 3, 1},
                                {.stride = {2, 3}, .dilation = {2, 1}, .groups = 3, .layout = et::Layout::nhwc}) ==
        et::Shape<4>{2, 3, 3, 6});  // P = (9 - 5) / 2 + 1, Q = (10 - 3) / 3 + 1
  CHECK(et::pool2d_output_shape({1, 3, 7, 9}, {.kernel = {2, 2}}) == et::Shape<4>{1, 3, 3, 4});
  CHECK(et::pool2d_output_shape({1, 7, 9, 3}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1},
                                               .layout = et::Layout::nhwc}) == et::Shape<4>{1, 4, 5, 3});
}

TEST_CASE("bad convolutions and poolings throw ShapeError with the shapes", "[conv][errors]") {
  const auto x = et::zeros<float>(et::cpu, {1, 6, 8, 8});
  const auto w = et::zeros<float>(et::cpu, {4, 3, 3, 3});
  const std::string shapes = "; input [1, 6, 8, 8], weight [4, 3, 3, 3] (nchw)";
  const auto fails = [](const auto& call, const std::string& message) {
    REQUIRE_THROWS_MATCHES(call(), et::ShapeError, Message(message));
  };
  fails([&] { return et::conv2d(x, w, {.stride = {0, 1}, .groups = 2}); },
        "et: conv2d: stride must be positive, got [0, 1]" + shapes);
  fails([&] { return et::conv2d(x, w, {.stride = {1, -2}, .groups = 2}); },
        "et: conv2d: stride must be positive, got [1, -2]" + shapes);
  fails([&] { return et::conv2d(x, w, {.dilation = {1, 0}, .groups = 2}); },
        "et: conv2d: dilation must be positive, got [1, 0]" + shapes);
  fails([&] { return et::conv2d(x, w, {.padding = {-1, 0}, .groups = 2}); },
        "et: conv2d: padding must be non-negative, got [-1, 0]" + shapes);
  fails([&] { return et::conv2d(x, w, {.groups = 0}); }, "et: conv2d: groups must be positive, got 0" + shapes);
  fails([&] { return et::conv2d(x, w, {.groups = 4}); },
        "et: conv2d: input channels (6) are not divisible by groups (4)" + shapes);
  fails([&] { return et::conv2d(x, w); },
        "et: conv2d: the weight has 3 input channel(s) per group, but 6 input channels in 1 group(s) need 6" + shapes);
  fails([&] { return et::conv2d(x, et::zeros<float>(et::cpu, {5, 3, 3, 3}), {.groups = 2}); },
        "et: conv2d: output channels (5) are not divisible by groups (2); input [1, 6, 8, 8], weight [5, 3, 3, 3] (nchw)");
  fails([&] { return et::conv2d(x, et::zeros<float>(et::cpu, {4, 3, 9, 3}), {.groups = 2}); },
        "et: conv2d: the kernel spans 9 x 3 (dilation [1, 1]) but the padded input is only 8 x 8 (padding [0, 0]); "
        "input [1, 6, 8, 8], weight [4, 3, 9, 3] (nchw)");
  fails([&] { return et::conv2d(x, w, {.dilation = {4, 1}, .groups = 2}); },
        "et: conv2d: the kernel spans 9 x 3 (dilation [4, 1]) but the padded input is only 8 x 8 (padding [0, 0])" + shapes);
  fails([&] {
    return et::conv2d(et::zeros<float>(et::cpu, {1, 8, 8, 6}), et::zeros<float>(et::cpu, {4, 3, 3, 2}),
                      {.groups = 2, .layout = et::Layout::nhwc});
  },
        "et: conv2d: the weight has 2 input channel(s) per group, but 6 input channels in 2 group(s) need 3; "
        "input [1, 8, 8, 6], weight [4, 3, 3, 2] (nhwc)");
  fails([&] { return et::conv2d(et::zeros<float>(et::cpu, {1, 0, 8, 8}), w); },
        "et: conv2d: input and weight extents must be positive (the batch may be 0); input [1, 0, 8, 8], weight [4, 3, 3, 3] (nchw)");
  fails([&] { return et::conv2d(x, w, et::zeros<float>(et::cpu, {3}), {.groups = 2}); },
        "et: conv2d: bias must have shape [4] (one value per output channel), got [3]" + shapes);
  fails([&] { return et::conv2d_backward_data(et::zeros<float>(et::cpu, {1, 4, 5, 5}), w, x.shape(), {.groups = 2}); },
        "et: conv2d_backward_data: grad_output has shape [1, 4, 5, 5], but the convolution of input [1, 6, 8, 8] "
        "with weight [4, 3, 3, 3] (nchw) gives [1, 4, 6, 6]");
  fails([&] { return et::conv2d_backward_filter(x, et::zeros<float>(et::cpu, {1, 4, 6, 5}), w.shape(), {.groups = 2}); },
        "et: conv2d_backward_filter: grad_output has shape [1, 4, 6, 5], but the convolution of input [1, 6, 8, 8] "
        "with weight [4, 3, 3, 3] (nchw) gives [1, 4, 6, 6]");
  fails([&] { return et::conv2d_backward_data(et::zeros<float>(et::cpu, {1, 4, 6, 6}), w, {1, 6, 8, 8}, {.groups = 3}); },
        "et: conv2d_backward_data: output channels (4) are not divisible by groups (3)" + shapes);

  const std::string input = "; input [1, 6, 8, 8] (nchw)";
  fails([&] { return et::max_pool2d(x, {}); }, "et: max_pool2d: kernel must be positive, got [0, 0] (set .kernel)" + input);
  fails([&] { return et::avg_pool2d(x, {.kernel = {2, 2}, .stride = {-1, 2}}); },
        "et: avg_pool2d: stride must be positive, or 0 for the kernel's extent, got [-1, 2]" + input);
  fails([&] { return et::avg_pool2d(x, {.kernel = {3, 3}, .padding = {2, 0}}); },
        "et: avg_pool2d: padding must be non-negative and at most half the kernel, got padding [2, 0] for kernel [3, 3]" +
            input);
  fails([&] { return et::max_pool2d(x, {.kernel = {9, 2}}); },
        "et: max_pool2d: the kernel [9, 2] is larger than the padded input (8 x 8 with padding [0, 0])" + input);
  fails([&] { return et::max_pool2d(et::zeros<float>(et::cpu, {1, 6, 0, 8}), {.kernel = {1, 1}}); },
        "et: max_pool2d: input extents must be positive (the batch may be 0); input [1, 6, 0, 8] (nchw)");
  const auto y = et::max_pool2d(x, {.kernel = {2, 2}});
  fails([&] { return et::max_pool2d_backward(y, x, et::zeros<float>(et::cpu, {1, 6, 4, 3}), {.kernel = {2, 2}}); },
        "et: max_pool2d_backward: y has shape [1, 6, 4, 3], but pooling input [1, 6, 8, 8] (nchw) gives [1, 6, 4, 4]");
  fails([&] { return et::avg_pool2d_backward(y, {1, 6, 8, 6}, {.kernel = {2, 2}}); },
        "et: avg_pool2d_backward: grad_output has shape [1, 6, 4, 4], but pooling input [1, 6, 8, 6] (nchw) gives "
        "[1, 6, 4, 3]");
}
