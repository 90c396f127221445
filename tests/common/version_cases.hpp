// Version counters, op family by op family, shared by the CPU and GPU tests: each case
// records an operation, writes in place into a tensor the operation saved for its backward
// (a leaf under NoGradGuard, as an optimizer step does, or a result, whose write is
// recorded), and expects the backward to throw an et::Error that names the operation.
// Inputs that need no gradient are tracked too: the count is kept with the data, so a write
// through any handle over it is seen (check_untracked_versions; docs/design.md).
#pragma once

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace test {

/// A leaf of `shape` on D that requires grad, filled with 0.5, 1, 1.5, ... (no ties).
template <class D, std::size_t R>
et::Tensor<double, int(R), D> version_leaf(const std::array<std::int64_t, R>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t e : shape) n *= e;
  std::vector<double> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.5 * double(i + 1);
  auto t = et::from_vector(et::cpu, values, shape).to(D{});
  t.requires_grad_(true);
  return t;
}

/// Adds 1 to a leaf in place outside recording, as an optimizer step does.
template <class T, int R, class D>
void step(et::Tensor<T, R, D>& leaf) {
  et::NoGradGuard no_grad;
  leaf += T(1);
}

/// The backward of `loss` throws, naming `op` and the version it saw.
template <class Loss>
void expect_modified(const Loss& loss, const std::string& op) {
  CAPTURE(op);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("backward of " + op) && Catch::Contains("modified in place") &&
                                         Catch::Contains("version"));
}

template <class D>
void check_matmul_versions() {
  using S2 = std::array<std::int64_t, 2>;
  for (int written = 0; written < 2; ++written) {
    auto a = version_leaf<D>(S2{2, 3}), b = version_leaf<D>(S2{3, 2});
    const et::Tensor<double, 2, D> h = et::matmul(a, b);
    step(written == 0 ? a : b);
    expect_modified(et::sum(h), "matmul");
  }
  // The loop of a training step: backward keeping the graph, a step, backward again.
  auto x = version_leaf<D>(S2{1, 2}), w = version_leaf<D>(S2{2, 1});
  et::optim::SGD<double, D> opt({w}, {.lr = 0.5});
  const auto loss = et::sum(et::eval(et::matmul(x, w)));
  loss.backward(et::retain_graph);
  opt.step();
  expect_modified(loss, "matmul");
  // act(x @ w + b): one linear-layer node, which saves x and w.
  auto b = version_leaf<D>(std::array<std::int64_t, 1>{1});
  const et::Tensor<double, 2, D> y = et::relu(et::matmul(x, w) + b);
  step(w);
  expect_modified(et::sum(y), "linear layer");
}

template <class D>
void check_fused_and_reduction_versions() {
  using S1 = std::array<std::int64_t, 1>;
  auto x = version_leaf<D>(S1{3}), y = version_leaf<D>(S1{3});
  const et::Tensor<double, 1, D> h = x * y;
  step(x);
  expect_modified(et::sum(h), "an assignment");
  auto z = version_leaf<D>(S1{3});
  const auto s = et::sum(z * z);
  step(z);
  expect_modified(s, "sum");
  // max and min over all elements, prod and norm read their result: a write into it.
  for (int kind = 0; kind < 4; ++kind) {
    auto v = version_leaf<D>(S1{3});
    auto r = kind == 0 ? et::max(v) : kind == 1 ? et::min(v) : kind == 2 ? et::prod(v) : et::norm(v);
    r += 1.0;
    expect_modified(r, kind == 0 ? "max" : kind == 1 ? "min" : kind == 2 ? "prod" : "norm");
  }
  // Over one axis max keeps the chosen index (as PyTorch does): its result may be written.
  auto v = version_leaf<D>(S1{3});
  auto m = et::max(v, 0);
  m += 1.0;
  m.backward();
  CHECK(v.grad().to(et::cpu).to_vector() == std::vector<double>{0, 0, 1});
}

template <class D>
void check_softmax_versions() {
  using S2 = std::array<std::int64_t, 2>;
  auto x = version_leaf<D>(S2{2, 3});
  auto p = et::softmax(x, 1);
  p += 1.0;
  expect_modified(et::sum(p * p), "softmax");
  auto lp = et::log_softmax(x, 1);
  lp += 1.0;
  expect_modified(et::sum(lp * lp), "log_softmax");
  auto lse = et::logsumexp(x, 1);
  step(x);
  expect_modified(et::sum(lse), "logsumexp");
  auto x2 = version_leaf<D>(S2{2, 3});
  auto lse2 = et::logsumexp(x2, 1);
  lse2 += 1.0;
  expect_modified(et::sum(lse2 * lse2), "logsumexp");
}

template <class D>
void check_nn_versions() {
  using S4 = std::array<std::int64_t, 4>;
  for (int written = 0; written < 2; ++written) {
    auto x = version_leaf<D>(S4{1, 1, 3, 3}), w = version_leaf<D>(S4{1, 1, 2, 2});
    const auto y = et::conv2d(x, w);
    step(written == 0 ? x : w);
    expect_modified(et::sum(y), "conv2d");
  }
  et::Pool2dOptions pool;
  pool.kernel = {2, 2};
  auto x = version_leaf<D>(S4{1, 1, 2, 2});
  const auto y = et::max_pool2d(x, pool);
  step(x);
  expect_modified(et::sum(y), "max_pool2d");
  auto x2 = version_leaf<D>(S4{1, 1, 2, 2});
  auto y2 = et::max_pool2d(x2, pool);
  y2 += 1.0;
  expect_modified(et::sum(y2), "max_pool2d");
  // batch_norm saves x and the weight; with its ReLU also y (the mask), in eval too.
  for (int written = 0; written < 4; ++written) {
    CAPTURE(written);
    auto xb = version_leaf<D>(S4{2, 2, 2, 1}), shortcut = version_leaf<D>(S4{2, 1, 2, 1});
    auto wb = version_leaf<D>(std::array<std::int64_t, 1>{2}), bb = version_leaf<D>(std::array<std::int64_t, 1>{2});
    const auto mean = et::zeros<double>(D{}, {2}), var = et::ones<double>(D{}, {2});
    auto yb = et::batch_norm_add(xb, shortcut, mean, var, wb, bb, {.training = written != 3, .relu = true}, 1);
    if (written == 0) step(xb);
    if (written == 1) step(wb);
    if (written >= 2) yb += 1.0;
    expect_modified(et::sum(yb * yb), "batch_norm");
  }
  auto logits = version_leaf<D>(std::array<std::int64_t, 2>{2, 3});
  const auto loss = et::nn::cross_entropy(logits, et::from_vector(et::cpu, std::vector<std::int64_t>{0, 2}, {2}).to(D{}));
  step(logits);
  expect_modified(loss, "cross_entropy");
}

/// The same plain double tensor as version_leaf, not requiring grad (no autograd state).
template <class D, std::size_t R>
et::Tensor<double, int(R), D> plain_tensor(const std::array<std::int64_t, R>& shape) {
  auto t = version_leaf<D>(shape).detach();
  return et::Tensor<double, int(R), D>(t.storage(), t.offset(), t.shape(), t.strides());  // a fresh handle
}

/// Inputs that do not require grad, written after an operation saved them, through the same
/// handle, a copy made before, a view, or a handle that shares only the storage; and the
/// writes that must stay allowed (into other data, or before the operation).
template <class D>
void check_untracked_versions() {
  using S2 = std::array<std::int64_t, 2>;
  using S4 = std::array<std::int64_t, 4>;
  for (int how = 0; how < 4; ++how) {
    CAPTURE(how);
    auto a = plain_tensor<D>(S2{2, 3});
    auto alias = a;  // a copy of the handle, made before anything was recorded
    auto b = version_leaf<D>(S2{3, 2});
    REQUIRE_FALSE(a.requires_grad());
    const et::Tensor<double, 2, D> h = et::matmul(a, b);
    if (how == 0) a += 1.0;
    if (how == 1) alias += 1.0;
    if (how == 2) a.slice(0, 1, 2) = 0.0;
    if (how == 3) {
      auto raw = et::Tensor<double, 2, D>(a.storage(), a.offset(), a.shape(), a.strides());
      raw *= 2.0;
    }
    expect_modified(et::sum(h), "matmul");
  }
  // The ReLU layer's input (linear-layer node) and a fused expression's plain operand.
  {
    auto x = plain_tensor<D>(S2{1, 2});
    auto w = version_leaf<D>(S2{2, 1});
    const et::Tensor<double, 2, D> y = et::relu(et::matmul(x, w));
    x += 1.0;
    expect_modified(et::sum(y), "linear layer");
    auto c = plain_tensor<D>(S2{2, 2});
    auto d = version_leaf<D>(S2{2, 2});
    const et::Tensor<double, 2, D> e = c * d;
    c.slice(1, 0, 1) = 5.0;
    expect_modified(et::sum(e), "an assignment");
  }
  // conv2d's input when only the weight requires grad.
  {
    auto x = plain_tensor<D>(S4{1, 1, 3, 3});
    auto w = version_leaf<D>(S4{1, 1, 2, 2});
    const auto y = et::conv2d(x, w);
    x += 1.0;
    expect_modified(et::sum(y), "conv2d");
  }
  // Writes that must not be reported: into data the operation did not save, or before it.
  {
    auto a = plain_tensor<D>(S2{2, 3});
    auto other = plain_tensor<D>(S2{2, 3});
    a += 1.0;
    auto b = version_leaf<D>(S2{3, 2});
    const et::Tensor<double, 2, D> h = et::matmul(a, b);
    other += 1.0;
    CHECK_NOTHROW(et::sum(h).backward());
    // a + 1 = 1.5, 2, 2.5 / 3, 3.5, 4: b's gradient is the column sums of a.
    CHECK(b.grad().to(et::cpu).to_vector() == std::vector<double>{4.5, 4.5, 5.5, 5.5, 6.5, 6.5});
  }
}

/// sort's indices, returned to the caller and kept by the backward: writing them is seen.
/// (Apart: on a GPU, sort needs a file that includes CUB, tests/gpu/test_index.cu.)
template <class D>
void check_sort_versions() {
  auto x = version_leaf<D>(std::array<std::int64_t, 2>{2, 3});
  auto [values, indices] = et::sort(x, 1, true);
  indices = std::int64_t(0);
  expect_modified(et::sum(values * values), "sort");
}

/// Tensors of no elements: a write into one changes nothing a backward reads, so it is not
/// reported (it was: the in-place write into an empty product threw at backward), and a
/// GELU linear layer with no output columns records (its buffer's stride was 0).
template <class D>
void check_empty_versions() {
  using S2 = std::array<std::int64_t, 2>;
  auto a = version_leaf<D>(S2{0, 3});
  auto b = version_leaf<D>(S2{0, 3});
  auto h = et::eval(a * b);
  h *= et::sigmoid(a);
  CHECK_NOTHROW(et::sum(h).backward());
  CHECK(a.grad().shape() == et::Shape<2>{0, 3});
  auto x = version_leaf<D>(S2{2, 3});
  auto w = version_leaf<D>(S2{3, 0});
  auto bias = version_leaf<D>(std::array<std::int64_t, 1>{0});
  const et::Tensor<double, 2, D> y = et::gelu_tanh(et::matmul(x, w) + bias);
  CHECK(y.shape() == et::Shape<2>{2, 0});
  CHECK_NOTHROW(et::sum(y).backward());
  CHECK(x.grad().to(et::cpu).to_vector() == std::vector<double>(6, 0.0));
}

}  // namespace test
