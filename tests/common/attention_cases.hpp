// et::scaled_dot_product_attention and nn::MultiheadAttention, shared by the CPU and GPU
// tests (tests/cpu/test_transformer.cpp, tests/gpu/test_transformer.cu):
//   - the output against a double reference computed here (scores, the causal triangle,
//     softmax, the weighted values), float and double, edge shapes (empty batch, one query,
//     no keys, Tq < Tk and Tq > Tk under the causal mask), q read through a permuted view;
//   - gradients of q, k and v against central differences, causal and not;
//   - dropout: the same seed the same mask, another seed another, p = 0 none;
//   - bad input: mismatched batches, heads, head dimensions, sequence lengths; dropout_p 1.
#pragma once

#include "gradcheck.hpp"
#include "random_values.hpp"
#include "reference.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace test {

/// softmax(q k^T * scale [+ causal]) v for [B, H, T, D] arrays in row-major order.
inline std::vector<double> attention_reference(const std::vector<double>& q, const std::vector<double>& k,
                                               const std::vector<double>& v, std::int64_t bh, std::int64_t tq,
                                               std::int64_t tk, std::int64_t dh, std::int64_t dv, bool causal,
                                               double scale) {
  std::vector<double> out(static_cast<std::size_t>(bh * tq * dv), 0.0);
  for (std::int64_t n = 0; n < bh; ++n)
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(static_cast<std::size_t>(tk));
      double top = -INFINITY;
      for (std::int64_t j = 0; j < tk; ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < dh; ++d)
          dot += q[std::size_t((n * tq + i) * dh + d)] * k[std::size_t((n * tk + j) * dh + d)];
        s[std::size_t(j)] = causal && j > i ? -INFINITY : dot * scale;
        top = std::max(top, s[std::size_t(j)]);
      }
      double total = 0;
      for (double& e : s) total += (e = std::exp(e - top));
      for (std::int64_t j = 0; j < tk; ++j)
        for (std::int64_t d = 0; d < dv; ++d)
          out[std::size_t((n * tq + i) * dv + d)] += s[std::size_t(j)] / total * v[std::size_t((n * tk + j) * dv + d)];
    }
  return out;
}

template <class D, class T>
void check_attention_shape(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t dh,
                           std::int64_t dv, bool causal, double tolerance) {
  CAPTURE(b, h, tq, tk, dh, dv, causal);
  const auto qs = random_values<double>(std::size_t(b * h * tq * dh), 51, -2, 2);
  const auto ks = random_values<double>(std::size_t(b * h * tk * dh), 52, -2, 2);
  const auto vs = random_values<double>(std::size_t(b * h * tk * dv), 53, -1, 1);
  // q as a model makes it: [B, T, H, Dh] permuted to [B, H, T, Dh] (not contiguous).
  std::vector<double> q_bthd(qs.size());
  for (std::int64_t n = 0; n < b; ++n)
    for (std::int64_t a = 0; a < h; ++a)
      for (std::int64_t i = 0; i < tq; ++i)
        for (std::int64_t d = 0; d < dh; ++d)
          q_bthd[std::size_t(((n * tq + i) * h + a) * dh + d)] = qs[std::size_t(((n * h + a) * tq + i) * dh + d)];
  const auto q = et::eval(et::cast<T>(et::from_vector(D{}, q_bthd, {b, tq, h, dh}))).permute({0, 2, 1, 3});
  const auto k = et::eval(et::cast<T>(et::from_vector(D{}, ks, {b, h, tk, dh})));
  const auto v = et::eval(et::cast<T>(et::from_vector(D{}, vs, {b, h, tk, dv})));
  const double scale = dh > 0 ? 1 / std::sqrt(double(dh)) : 1.0;
  const auto before = et::attention_path_counts();
  const auto o = et::scaled_dot_product_attention(q, k, v, {.causal = causal});
  CHECK(et::attention_path_counts().composed + et::attention_path_counts().fused ==
        before.composed + before.fused + 1);
  CHECK(o.shape() == et::Shape<4>{b, h, tq, dv});
  const auto got = et::eval(et::cast<double>(o)).to_vector();
  check_scaled_close(got, attention_reference(qs, ks, vs, b * h, tq, tk, dh, dv, causal, scale), tolerance,
                     "scaled_dot_product_attention");
  // An explicit scale.
  const auto o2 = et::scaled_dot_product_attention(q, k, v, {.causal = causal, .scale = 0.3});
  check_scaled_close(et::eval(et::cast<double>(o2)).to_vector(),
                     attention_reference(qs, ks, vs, b * h, tq, tk, dh, dv, causal, 0.3), tolerance,
                     "scaled_dot_product_attention with a scale");
}

template <class D>
void check_attention_forms() {
  struct Case {
    std::int64_t b, h, tq, tk, dh, dv;
  };
  for (const bool causal : {false, true})
    for (const Case c : {Case{2, 3, 5, 5, 4, 4}, Case{1, 1, 1, 1, 1, 1}, Case{1, 2, 3, 7, 8, 5}, Case{2, 1, 6, 3, 2, 2},
                         Case{0, 2, 3, 3, 4, 4}, Case{1, 1, 0, 3, 4, 4}, Case{1, 1, 2, 0, 4, 3}, Case{2, 2, 33, 33, 16, 16}}) {
      if (causal && c.tk == 0) continue;  // no key to see: PyTorch's answer is NaN; not a case to pin down
      check_attention_shape<D, double>(c.b, c.h, c.tq, c.tk, c.dh, c.dv, causal, 1e-12);
      check_attention_shape<D, float>(c.b, c.h, c.tq, c.tk, c.dh, c.dv, causal, 2e-5);
    }
}

template <class D>
void check_attention_gradients() {
  const auto q = grad_input<4>({2, 2, 4, 3}, 61), k = grad_input<4>({2, 2, 5, 3}, 62), v = grad_input<4>({2, 2, 5, 2}, 63);
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    gradcheck<D>("scaled_dot_product_attention",
                 [causal](const auto& a, const auto& b, const auto& c) {
                   return et::scaled_dot_product_attention(a, b, c, {.causal = causal});
                 },
                 q, k, v);
  }
}

template <class D>
void check_attention_dropout_and_errors() {
  const auto q = et::randn<float>(D{}, {2, 2, 8, 4}, 1), k = et::randn<float>(D{}, {2, 2, 8, 4}, 2),
             v = et::randn<float>(D{}, {2, 2, 8, 4}, 3);
  const auto plain = et::scaled_dot_product_attention(q, k, v).to_vector();
  const auto a = et::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .seed = 7}).to_vector();
  const auto b = et::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .seed = 7}).to_vector();
  const auto c = et::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.5, .seed = 8}).to_vector();
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != plain);
  CHECK(et::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.0, .seed = 7}).to_vector() == plain);
  const auto other = [](std::int64_t b, std::int64_t h, std::int64_t t, std::int64_t d) {
    return et::randn<float>(D{}, {b, h, t, d}, 4);
  };
  CHECK_THROWS_WITH(et::scaled_dot_product_attention(q, other(2, 2, 8, 5), v),
                    Catch::Contains("q and k must have the same head dimension"));
  CHECK_THROWS_WITH(et::scaled_dot_product_attention(q, other(2, 3, 8, 4), v), Catch::Contains("same batch and heads"));
  CHECK_THROWS_WITH(et::scaled_dot_product_attention(q, other(1, 2, 8, 4), v), Catch::Contains("same batch and heads"));
  CHECK_THROWS_WITH(et::scaled_dot_product_attention(q, k, other(2, 2, 7, 4)),
                    Catch::Contains("k and v must have the same sequence length"));
  CHECK_THROWS_WITH(et::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0}), Catch::Contains("dropout_p"));
  CHECK_THROWS_AS(et::scaled_dot_product_attention(et::Tensor<float, 4, D>{}, k, v), et::Error);
}

/// nn::MultiheadAttention: PyTorch's names and shapes; self-attention and distinct inputs
/// against the projections and the double reference computed here; batch_first the same
/// function of the transposed input; every parameter reached by the backward; bad input.
template <class D>
void check_multihead_attention() {
  const std::int64_t e = 6, h = 2, dh = 3, b = 2, t = 4, s = 5;
  et::nn::MultiheadAttention<double, D> mha(D{}, e, h, {}, 11);
  std::vector<std::string> names;
  et::nn::for_each_tensor(mha, [&](const std::string& name, const auto& tensor) {
    names.push_back(name + " " + et::format_shape(tensor.shape()));
  });
  CHECK(names == std::vector<std::string>{"in_proj_weight [18, 6]", "in_proj_bias [18]", "out_proj.weight [6, 6]",
                                          "out_proj.bias [6]"});
  CHECK(mha.parameters().size() == 4);
  // Non-zero biases, so that the reference tests them.
  mha.in_proj_bias.detach().copy_(et::randn<double>(D{}, {3 * e}, 12));
  mha.out_proj.bias.detach().copy_(et::randn<double>(D{}, {e}, 13));
  const auto w = mha.in_proj_weight.detach().to_vector(), bias = mha.in_proj_bias.detach().to_vector();
  const auto wo = mha.out_proj.weight.detach().to_vector(), bo = mha.out_proj.bias.detach().to_vector();
  // x [T, B, E] (PyTorch's default layout) -> the reference's [B, H, T, Dh] of one projection.
  const auto project = [&](const std::vector<double>& x, std::int64_t len, std::int64_t part) {
    std::vector<double> out(std::size_t(b * h * len * dh));
    for (std::int64_t i = 0; i < len; ++i)
      for (std::int64_t n = 0; n < b; ++n)
        for (std::int64_t r = 0; r < e; ++r) {
          double v = bias[std::size_t(part * e + r)];
          for (std::int64_t c = 0; c < e; ++c)
            v += x[std::size_t((i * b + n) * e + c)] * w[std::size_t((part * e + r) * e + c)];
          out[std::size_t(((n * h + r / dh) * len + i) * dh + r % dh)] = v;
        }
    return out;
  };
  const auto finish = [&](const std::vector<double>& o, std::int64_t len) {  // [B, H, T, Dh] -> out_proj, [T, B, E]
    std::vector<double> y(std::size_t(len * b * e));
    for (std::int64_t i = 0; i < len; ++i)
      for (std::int64_t n = 0; n < b; ++n)
        for (std::int64_t r = 0; r < e; ++r) {
          double v = bo[std::size_t(r)];
          for (std::int64_t c = 0; c < e; ++c)
            v += o[std::size_t(((n * h + c / dh) * len + i) * dh + c % dh)] * wo[std::size_t(r * e + c)];
          y[std::size_t((i * b + n) * e + r)] = v;
        }
    return y;
  };
  const auto xs = random_values<double>(std::size_t(t * b * e), 14, -1, 1);
  const auto ks = random_values<double>(std::size_t(s * b * e), 15, -1, 1), vs = random_values<double>(std::size_t(s * b * e), 16, -1, 1);
  const auto x = et::from_vector(D{}, xs, {t, b, e}), key = et::from_vector(D{}, ks, {s, b, e}),
             value = et::from_vector(D{}, vs, {s, b, e});
  const double scale = 1 / std::sqrt(double(dh));
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const auto self = mha.forward(x, {.causal = causal});
    CHECK(self.shape() == et::Shape<3>{t, b, e});
    check_scaled_close(self.to_vector(),
                       finish(attention_reference(project(xs, t, 0), project(xs, t, 1), project(xs, t, 2), b * h, t, t, dh,
                                                  dh, causal, scale),
                              t),
                       1e-12, "MultiheadAttention, self-attention");
    const auto cross = mha.forward(x, key, value, {.causal = causal});
    check_scaled_close(cross.to_vector(),
                       finish(attention_reference(project(xs, t, 0), project(ks, s, 1), project(vs, s, 2), b * h, t, s, dh,
                                                  dh, causal, scale),
                              t),
                       1e-12, "MultiheadAttention, distinct query, key and value");
  }
  // batch_first: the same module's function of [B, T, E].
  et::nn::MultiheadAttention<double, D> first(D{}, e, h, {.batch_first = true}, 11);
  first.in_proj_weight.detach().copy_(mha.in_proj_weight.detach());
  first.in_proj_bias.detach().copy_(mha.in_proj_bias.detach());
  first.out_proj.weight.detach().copy_(mha.out_proj.weight.detach());
  first.out_proj.bias.detach().copy_(mha.out_proj.bias.detach());
  const auto xt = et::eval(x.permute({1, 0, 2}));
  check_scaled_close(et::eval(first(xt).permute({1, 0, 2})).to_vector(), mha(x).to_vector(), 1e-12,
                     "MultiheadAttention, batch_first");
  // The backward reaches every parameter.
  et::sum(mha(x) * mha(x)).backward();
  for (const auto& p : mha.parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(et::sum(et::abs(p.grad())).item() > 0);
  }
  // No bias: two parameters.
  et::nn::MultiheadAttention<double, D> plain(D{}, e, h, {.bias = false});
  CHECK(plain.parameters().size() == 2);
  CHECK(plain(x).shape() == x.shape());
  CHECK_THROWS_WITH((et::nn::MultiheadAttention<double, D>(D{}, 6, 4)), Catch::Contains("divisible by num_heads"));
  CHECK_THROWS_WITH(mha(et::randn<double>(D{}, {t, b, 5}, 1)), Catch::Contains("its last axis must be 6"));
  CHECK_THROWS_WITH(mha.forward(x, et::randn<double>(D{}, {s, 3, e}, 1), et::randn<double>(D{}, {s, 3, e}, 2)),
                    Catch::Contains("one batch size"));
  CHECK_THROWS_AS((et::nn::MultiheadAttention<double, D>(D{}, 6, 2, {.dropout = 1.0})), et::Error);
}

}  // namespace test
