// Gradient checks of every differentiable operation, shared by the CPU and GPU tests
// (test_autograd.cpp / .cu): each case is a function of double-precision tensors checked
// by test::gradcheck (central differences) on device D, over shapes that include 0-d,
// broadcast, non-contiguous (views inside the function) and empty operands.
#pragma once

#include "gradcheck.hpp"

#include <et/et.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace test {

using S0 = std::array<std::int64_t, 0>;
using S1 = std::array<std::int64_t, 1>;
using S2 = std::array<std::int64_t, 2>;
using S3 = std::array<std::int64_t, 3>;
using S4 = std::array<std::int64_t, 4>;

template <class D>
void check_elementwise_gradients() {
  const auto x = grad_input(S2{3, 4}, 1), y = grad_input(S2{3, 4}, 2), pos = grad_input(S2{3, 4}, 3, 0.5, 2.0);
  // Away from the kinks of abs and relu (|x| >= 0.25).
  auto away = grad_input(S2{3, 4}, 4);
  for (double& v : away.values) v = v < 0 ? v - 0.25 : v + 0.25;
  gradcheck<D>("exp", [](const auto& a) { return et::eval(et::exp(a)); }, x);
  gradcheck<D>("log", [](const auto& a) { return et::eval(et::log(a)); }, pos);
  gradcheck<D>("log1p", [](const auto& a) { return et::eval(et::log1p(a)); }, pos);
  gradcheck<D>("sqrt", [](const auto& a) { return et::eval(et::sqrt(a)); }, pos);
  gradcheck<D>("rsqrt", [](const auto& a) { return et::eval(et::rsqrt(a)); }, pos);
  gradcheck<D>("abs", [](const auto& a) { return et::eval(et::abs(a)); }, away);
  gradcheck<D>("sin cos", [](const auto& a) { return et::eval(et::sin(a) * et::cos(a)); }, x);
  gradcheck<D>("tanh", [](const auto& a) { return et::eval(et::tanh(a)); }, x);
  gradcheck<D>("sigmoid", [](const auto& a) { return et::eval(et::sigmoid(a)); }, x);
  gradcheck<D>("relu", [](const auto& a) { return et::eval(et::relu(a)); }, away);
  gradcheck<D>("gelu", [](const auto& a) { return et::eval(et::gelu(a)); }, x);
  gradcheck<D>("gelu_tanh", [](const auto& a) { return et::eval(et::gelu_tanh(a)); }, x);
  gradcheck<D>("square, negate", [](const auto& a) { return et::eval(-et::square(a)); }, x);
  gradcheck<D>("pow(x, 3)", [](const auto& a) { return et::eval(et::pow(a, 3.0)); }, x);
  gradcheck<D>("pow(x, y)", [](const auto& a, const auto& b) { return et::eval(et::pow(a, b)); }, pos, y);
  gradcheck<D>("+ - * /", [](const auto& a, const auto& b, const auto& c) { return et::eval((a + b) * c - a / c); },
               x, y, pos);
  gradcheck<D>("scalars", [](const auto& a) { return et::eval(2.0 * a - 1.5 / (a + 3.0)); }, x);
  gradcheck<D>("maximum, minimum",
               [](const auto& a, const auto& b) { return et::eval(et::maximum(a, b) + 2.0 * et::minimum(a, b)); }, x,
               y);
  gradcheck<D>("clamp with tensor bounds",
               [](const auto& a, const auto& lo, const auto& hi) { return et::eval(et::clamp(a, lo - 1.0, hi + 1.0)); },
               x, grad_input(S2{3, 4}, 5, -1.0, 0.0), grad_input(S2{3, 4}, 6, 0.0, 1.0));
  gradcheck<D>("where", [](const auto& a, const auto& b) { return et::eval(et::where(a > b, a * b, a + b)); }, x, y);
  gradcheck<D>("cast", [](const auto& a) { return et::eval(et::cast<double>(a) * 2.0); }, x);
  gradcheck<D>("a tensor used three times", [](const auto& a) { return et::eval(a * a + et::exp(a)); }, x);
  gradcheck<D>("a named subexpression used twice",
               [](const auto& a, const auto& b) {
                 const auto e = et::tanh(a * b + 1.0);
                 return et::eval(e * (e - b));
               },
               x, y);
}

template <class D>
void check_broadcast_gradients() {
  gradcheck<D>("matrix + row", [](const auto& m, const auto& r) { return et::eval(m * r + r); },
               grad_input(S2{3, 4}, 11), grad_input(S1{4}, 12));
  gradcheck<D>("column * row", [](const auto& c, const auto& r) { return et::eval(et::exp(c * r)); },
               grad_input(S2{3, 1}, 13), grad_input(S2{1, 4}, 14));
  gradcheck<D>("0-d scale", [](const auto& s, const auto& m) { return et::eval(s * m); }, grad_input(S0{}, 15),
               grad_input(S3{2, 3, 2}, 16));
  gradcheck<D>("middle axis", [](const auto& a, const auto& b) { return et::eval(a - b); },
               grad_input(S3{2, 3, 4}, 17), grad_input(S3{2, 1, 4}, 18));
  gradcheck<D>("broadcast into a larger destination",
               [](const auto& r) {
                 et::Tensor<double, 2, D> out = et::zeros<double>(D{}, {3, 4});
                 out = r * 2.0;  // the destination's shape decides the index space
                 return out;
               },
               grad_input(S1{4}, 19));
  gradcheck<D>("transposed and stepped operands",
               [](const auto& a, const auto& b) { return et::eval(a.transpose(0, 1) * b.slice(1, 0, 6, 2)); },
               grad_input(S2{3, 4}, 20), grad_input(S2{4, 6}, 21));
  gradcheck<D>("empty", [](const auto& a, const auto& b) { return et::eval(a * b); }, grad_input(S2{0, 3}, 22),
               grad_input(S1{3}, 23));
}

template <class D>
void check_reduction_gradients() {
  const auto x = grad_input(S2{3, 5}, 31);
  gradcheck<D>("sum", [](const auto& a) { return et::sum(a * a); }, x);
  gradcheck<D>("sum over axis 0", [](const auto& a) { return et::sum(et::exp(a), 0); }, x);
  gradcheck<D>("sum over axis 1, keepdim", [](const auto& a) { return et::sum(a, 1, true); }, x);
  gradcheck<D>("mean", [](const auto& a) { return et::mean(a * 3.0); }, x);
  gradcheck<D>("mean over axis 1", [](const auto& a) { return et::mean(a, 1); }, x);
  gradcheck<D>("max", [](const auto& a) { return et::max(a); }, x);
  gradcheck<D>("min over axis 0", [](const auto& a) { return et::min(a, 0); }, x);
  gradcheck<D>("max over axis 1 of an expression", [](const auto& a, const auto& b) { return et::max(a * b, 1); }, x,
               grad_input(S1{5}, 32));
  gradcheck<D>("prod", [](const auto& a) { return et::prod(a); }, grad_input(S1{6}, 33));
  gradcheck<D>("prod over axis 1", [](const auto& a) { return et::prod(a, 1); }, x);
  gradcheck<D>("norm", [](const auto& a) { return et::norm(a); }, x);
  gradcheck<D>("norm over axis 0", [](const auto& a) { return et::norm(a, 0); }, x);
  gradcheck<D>("logsumexp", [](const auto& a) { return et::logsumexp(a, 1); }, x);
  gradcheck<D>("softmax", [](const auto& a) { return et::softmax(a, 1); }, x);
  gradcheck<D>("softmax over axis 0", [](const auto& a) { return et::softmax(a, 0); }, x);
  gradcheck<D>("log_softmax", [](const auto& a) { return et::log_softmax(a, 1); }, x);
  gradcheck<D>("log_softmax of a transposed expression",
               [](const auto& a, const auto& b) { return et::log_softmax(a.transpose(0, 1) * b, 0); }, x,
               grad_input(S1{3}, 36));
  gradcheck<D>("logsumexp over axis 0, keepdim", [](const auto& a) { return et::logsumexp(a, 0, true); }, x);
  gradcheck<D>("sum of 0-d", [](const auto& a) { return et::sum(a * 2.0); }, grad_input(S0{}, 34));
  gradcheck<D>("sum of empty", [](const auto& a) { return et::sum(a); }, grad_input(S2{0, 3}, 35));
}

template <class D>
void check_view_gradients() {
  const auto x = grad_input(S3{2, 3, 4}, 41);
  gradcheck<D>("reshape", [](const auto& a) { return et::eval(a.reshape({6, 4}) * 2.0); }, x);
  gradcheck<D>("view", [](const auto& a) { return a.view({4, 6}); }, x);
  gradcheck<D>("reshape of a transpose (copies)", [](const auto& a) { return a.transpose(0, 2).reshape({24}); }, x);
  gradcheck<D>("permute", [](const auto& a) { return a.permute({2, 0, 1}); }, x);
  gradcheck<D>("select", [](const auto& a) { return a.select(1, 2); }, x);
  gradcheck<D>("slice with step", [](const auto& a) { return a.slice(2, 1, 4, 2); }, x);
  gradcheck<D>("squeeze, unsqueeze",
               [](const auto& a) { return a.slice(0, 1, 2).squeeze(0).unsqueeze(2); }, x);
  gradcheck<D>("expand", [](const auto& a) { return et::eval(a.expand({3, 2, 4}) * 1.0); },
               grad_input(S2{2, 1}, 42));
  gradcheck<D>("clone, contiguous", [](const auto& a) { return a.transpose(0, 1).clone().contiguous(); }, x);
  gradcheck<D>("views feeding a reduction", [](const auto& a) { return et::sum(a.select(0, 1).transpose(0, 1), 1); },
               x);
}

/// Linear layers, each one recorded node (derivatives/linear.hpp): every combination of bias
/// and activation, the weight laid out as Linear's, a bias broadcast from one element, empty
/// and k = 0 products, an input that needs no gradient, and stacks of layers (where on CUDA
/// a layer's input-gradient GEMM applies the layer below's derivative), one of them with a
/// hidden output read by two layers.
template <class D>
void check_linear_gradients() {
  auto x = grad_input(S2{4, 3}, 71);
  const auto w = grad_input(S2{3, 5}, 72), wt = grad_input(S2{5, 3}, 73);
  const auto b = grad_input(S1{5}, 74);
  gradcheck<D>("gelu_tanh(x @ w^T + b)",
               [](const auto& x, const auto& w, const auto& b) {
                 return et::eval(et::gelu_tanh(et::matmul(x, w.transpose(0, 1)) + b));
               },
               x, wt, b);
  gradcheck<D>("x @ w^T + b", [](const auto& x, const auto& w, const auto& b) { return et::eval(et::matmul(x, w.transpose(0, 1)) + b); },
               x, wt, b);
  gradcheck<D>("b + x @ w", [](const auto& x, const auto& w, const auto& b) { return et::eval(b + et::matmul(x, w)); }, x, w, b);
  gradcheck<D>("relu(x @ w)", [](const auto& x, const auto& w) { return et::eval(et::relu(et::matmul(x, w))); }, x, w);
  gradcheck<D>("gelu_tanh(x @ w)", [](const auto& x, const auto& w) { return et::eval(et::gelu_tanh(et::matmul(x, w))); }, x,
               w);
  gradcheck<D>("relu(x @ w + b), b of one element",
               [](const auto& x, const auto& w, const auto& b) { return et::eval(et::relu(et::matmul(x, w) + b)); }, x,
               w, grad_input(S1{1}, 75));
  gradcheck<D>("relu(x @ w + b), no rows",
               [](const auto& x, const auto& w, const auto& b) { return et::eval(et::relu(et::matmul(x, w) + b)); },
               grad_input(S2{0, 3}, 76), w, b);
  gradcheck<D>("relu(x @ w + b), k = 0",
               [](const auto& x, const auto& w, const auto& b) { return et::eval(et::relu(et::matmul(x, w) + b)); },
               grad_input(S2{4, 0}, 77), grad_input(S2{0, 5}, 78), b);
  auto stack = [](const auto& x, const auto& w1, const auto& b1, const auto& w2, const auto& b2) {
    const auto h = et::eval(et::relu(et::matmul(x, w1) + b1));
    const auto y = et::eval(et::gelu_tanh(et::matmul(h, w2.transpose(0, 1)) + b2));
    return et::eval(et::relu(et::matmul(y, w2) + b1));  // w2 and b1 used twice
  };
  const auto w2 = grad_input(S2{3, 5}, 79);
  const auto b2 = grad_input(S1{3}, 80);
  gradcheck<D>("a stack of three layers", stack, x, w, b, w2, b2);
  x.requires_grad = false;
  gradcheck<D>("a stack of three layers, x needing no gradient", stack, x, w, b, w2, b2);
  gradcheck<D>("a hidden output read by two layers",
               [](const auto& x, const auto& w, const auto& b, const auto& w2) {
                 const auto h = et::eval(et::relu(et::matmul(x, w) + b));
                 const auto y = et::eval(et::relu(et::matmul(h, w2.transpose(0, 1))));
                 const auto z = et::eval(et::matmul(h, w2.transpose(0, 1)) + 1.0);
                 return et::eval(y * 2.0 + z);
               },
               grad_input(S2{4, 3}, 81), w, b, w);
}

template <class D>
void check_matmul_gradients() {
  gradcheck<D>("matmul", [](const auto& a, const auto& b) { return et::eval(et::matmul(a, b)); },
               grad_input(S2{3, 4}, 51), grad_input(S2{4, 5}, 52));
  gradcheck<D>("matmul of a transpose", [](const auto& a, const auto& b) { return et::eval(et::matmul(a.transpose(0, 1), b)); },
               grad_input(S2{4, 3}, 53), grad_input(S2{4, 2}, 54));
  gradcheck<D>("a weight used transposed, as Linear does (its gradient computed transposed)",
               [](const auto& x, const auto& w) { return et::eval(et::matmul(x, w.transpose(0, 1))); },
               grad_input(S2{4, 3}, 64), grad_input(S2{5, 3}, 65));
  gradcheck<D>("a weight used transposed by a batch",
               [](const auto& x, const auto& w) { return et::eval(et::matmul(x, w.transpose(0, 1))); },
               grad_input(S3{2, 4, 3}, 66), grad_input(S2{5, 3}, 67));
  gradcheck<D>("batched matmul", [](const auto& a, const auto& b) { return et::eval(et::matmul(a, b)); },
               grad_input(S3{2, 3, 4}, 55), grad_input(S3{2, 4, 2}, 56));
  gradcheck<D>("batch @ shared matrix", [](const auto& a, const auto& b) { return et::eval(et::matmul(a, b)); },
               grad_input(S3{2, 3, 4}, 57), grad_input(S2{4, 2}, 58));
  gradcheck<D>("linear layer relu(x @ w + b)",
               [](const auto& x, const auto& w, const auto& b) { return et::eval(et::relu(et::matmul(x, w) + b)); },
               grad_input(S2{4, 3}, 59), grad_input(S2{3, 5}, 60), grad_input(S1{5}, 61));
  gradcheck<D>("matmul of expressions",
               [](const auto& a, const auto& b) { return et::eval(et::matmul(a * 2.0, et::tanh(b))); },
               grad_input(S2{2, 3}, 62), grad_input(S2{3, 2}, 63));
}

template <class D>
void check_nn_gradients() {
  gradcheck<D>("conv2d with bias",
               [](const auto& x, const auto& w, const auto& b) {
                 return et::conv2d(x, w, b, {.stride = {1, 2}, .padding = {1, 1}});
               },
               grad_input(S4{2, 2, 5, 5}, 71), grad_input(S4{3, 2, 3, 3}, 72), grad_input(S1{3}, 73));
  gradcheck<D>("conv2d nhwc, groups",
               [](const auto& x, const auto& w) {
                 return et::conv2d(x, w, {.padding = {1, 0}, .groups = 2, .layout = et::Layout::nhwc});
               },
               grad_input(S4{1, 4, 4, 4}, 74), grad_input(S4{2, 3, 3, 2}, 75));
  gradcheck<D>("max_pool2d", [](const auto& x) { return et::max_pool2d(x, {.kernel = {2, 2}}); },
               grad_input(S4{1, 2, 4, 4}, 76));
  gradcheck<D>("avg_pool2d",
               [](const auto& x) { return et::avg_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}); },
               grad_input(S4{2, 1, 4, 3}, 77));
}

/// The seed's worked example: y = mean((x + 2)^2 + 3) at x = [0, 1, 2] gives [4/3, 2, 8/3].
template <class D>
void check_seed_example() {
  auto x = et::from_vector(D{}, std::vector<float>{0, 1, 2}, {3});
  x.requires_grad_(true);
  auto y = et::mean(et::pow(x + 2, 2) + 3);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  y.backward();
  const auto g = x.grad().to_vector();
  REQUIRE(g.size() == 3);
  CHECK(g[0] == Approx(4.0 / 3));
  CHECK(g[1] == Approx(2.0));
  CHECK(g[2] == Approx(8.0 / 3));
}

/// In-place operations on recorded tensors are recorded, reading the values they overwrite.
template <class D>
void check_in_place_writes() {
  auto x = et::from_vector(D{}, std::vector<double>{1, 2}, {2});
  x.requires_grad_(true);
  et::Tensor<double, 1, D> h = x * 2.0;  // 2x
  h *= h;                                 // 4x^2: the node keeps h's old values
  h += x;                                 // 4x^2 + x
  et::sum(h).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{9, 17});  // 8x + 1

  auto w = et::from_vector(D{}, std::vector<double>{1, 2, 3, 4}, {2, 2});
  w.requires_grad_(true);
  const auto b = et::from_vector(D{}, std::vector<double>{1, -1, 5, 7}, {2, 2});
  et::Tensor<double, 2, D> a = w * 1.0;
  a = et::matmul(a, b);  // in place: the product's node keeps the old a
  a = et::matmul(a, b);  // w b b
  et::sum(a).backward();
  // d sum(w B)/dw = ones @ B^T with B = b b = [[-4, -8], [40, 44]]: rows of B summed.
  CHECK(w.grad().to_vector() == std::vector<double>{-12, 84, -12, 84});
}

/// Writes into views are recorded (PyTorch's CopySlices): the viewed tensor's gradient
/// skips the overwritten elements, which send theirs to what was written; views made
/// before the write read the new values and differentiate them.
template <class D>
void check_view_writes() {
  const auto a = grad_input(S2{4, 5}, 21), b = grad_input(S2{2, 5}, 22), c = grad_input(S2{3, 3}, 23);
  gradcheck<D>("an expression written into a slice of a result",
               [](const auto& x, const auto& y) {
                 et::Tensor<double, 2, D> h = x * 2.0;
                 h.slice(0, 1, 3) = y * y;
                 return et::eval(h * h + x);
               },
               a, b);
  gradcheck<D>("+= into a stepped slice of a transpose, reading another view",
               [](const auto& x, const auto& y) {
                 et::Tensor<double, 2, D> h = et::exp(x * 0.5);    // [4, 5]
                 auto t = h.transpose(0, 1);                        // [5, 4], a view
                 t.slice(0, 0, 4, 2) += y.slice(1, 0, 4) * h.transpose(0, 1).slice(0, 1, 3);
                 return et::eval(h * x);
               },
               a, b);
  gradcheck<D>("a buffer without history assembled from results (a concatenation)",
               [](const auto& x, const auto& y) {
                 auto buffer = et::zeros<double>(D{}, {5, 5});
                 buffer.slice(0, 0, 2) = x.slice(0, 0, 2);
                 buffer.slice(0, 2, 5).slice(1, 1, 4) = et::tanh(y);
                 return et::eval(buffer * buffer);
               },
               a, c);
  gradcheck<D>("select += reading itself; constants written into a slice",
               [](const auto& x, const auto& y) {
                 et::Tensor<double, 2, D> h = x * x;
                 h.select(1, 2) += h.select(1, 2) * y.select(0, 1).slice(0, 0, 4);
                 h.slice(0, 3, 4) = 0.5;
                 h.slice(0, 0, 0) = 7.0;  // empty
                 return et::eval(h);
               },
               a, b);
  gradcheck<D>("views made before a write see it",
               [](const auto& x, const auto& y) {
                 et::Tensor<double, 2, D> h = x + 1.0;
                 auto early = h.slice(0, 0, 2);   // overlaps the write below
                 auto row = early.select(0, 1);   // a view of a view
                 h.slice(0, 1, 3) = y * 3.0;
                 return et::eval(early * x.slice(0, 0, 2) + row);
               },
               a, b);
  // A result overwritten by values that need no gradient passes none on.
  auto x = et::ones<double>(D{}, {4});
  x.requires_grad_(true);
  et::Tensor<double, 1, D> h = x * 2.0;
  h = 5.0;
  CHECK(h.requires_grad());
  et::sum(h).backward();
  CHECK_FALSE(x.grad().defined());
  // What cannot be recorded says so.
  CHECK_THROWS_WITH(x.select(0, 1) += 1.0, Catch::Contains("view of a leaf tensor that requires grad"));
  et::Tensor<double, 1, D> r = x * 1.0;
  et::Tensor<double, 1, D> under_guard;
  {
    et::NoGradGuard guard;
    under_guard = r.slice(0, 0, 2);
  }
  CHECK_THROWS_WITH(under_guard = x.slice(0, 2, 4) * 3.0, Catch::Contains("made under et::NoGradGuard"));
  CHECK_THROWS_WITH(r.view({4, 1}).expand({4, 3}) = x.view({4, 1}) * 1.0, Catch::Contains("et:"));
  auto buf = et::zeros<double>(D{}, {4});
  buf.slice(0, 0, 2) = 1.0;  // nothing needs a gradient: an ordinary write
  CHECK_FALSE(buf.requires_grad());
  {
    et::NoGradGuard guard;
    r.slice(0, 0, 2) = 5.0;  // not recorded
  }
  CHECK(buf.to_vector() == std::vector<double>{1, 1, 0, 0});
  CHECK(r.to_vector() == std::vector<double>{5, 5, 1, 1});
}

}  // namespace test
