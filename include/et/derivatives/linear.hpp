// Recording a linear layer. `act(matmul(a, w) + bias)`, a and w matrices, act ReLU or GELU
// (tanh form), either the bias or the activation optional (ops/linalg.hpp's
// EpiloguePattern), is ONE node rather than a product node and an elementwise one. Its
// forward is one GEMM whose epilogue adds the bias and applies the activation (cuBLASLt's
// RELU_BIAS; GELU_AUX_BIAS, which also writes the activation's input for the derivative).
// Its backward, given the gradient g of its output:
//
//   dz = g * act'(z)          the pre-activation's gradient: for GELU handed over finished
//                             by the consumer (below) where it could be, else one
//                             elementwise pass (ReLU: from the output's sign)
//   d bias = dz summed over its rows, in the weight-gradient GEMM's epilogue (BGRAD)
//   da = dz w^T, dw = a^T dz  two GEMMs (dw folded into an optimizer's step where offered)
//
// and where a is itself the output of such a node with GELU, and this node is the only one
// that sends that node a gradient, da's GEMM applies that node's derivative and computes
// its bias gradient in its epilogue (DGELU_BGRAD) and hands both over. ReLU's DRELU_BGRAD
// is not used: its mask passes the gradient where the pre-activation is exactly 0, where
// etensor (as PyTorch) gives 0 — measured on an H200, it changed the gradients of a layer
// whose integer-valued pre-activations hit 0. Where a backend cannot apply an epilogue (the
// CPU; a layout or type cuBLASLt refuses), the same node does that part separately, with
// the same result.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "et/derivatives/linalg.hpp"

namespace et::detail {

/// g * d act(x)/dx, from x the activation's input, or for ReLU its output (relu'(0) = 0).
template <class Act>
struct TimesDerivative {
  template <class G, class X> ET_HD auto operator()(G g, X x) const { return g * Act::template partial<0>(Act{}(x), x); }
};

constexpr std::int64_t round_up(std::int64_t n, std::int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

template <class T, class D>
class LinearBackward final : public GradSink<T, 2, D> {
 public:
  using Matrix = Tensor<T, 2, D>;
  using Vector = Tensor<T, 1, D>;

  /// `activation`: GemmEpilogue::none, relu or gelu. Takes the inputs' edges and versions
  /// before forward() writes the output.
  LinearBackward(const Matrix& a, const Matrix& w, const Vector* bias, GemmEpilogue activation, MathMode mode)
      : a_(saved_data(a)), w_(saved_data(w)), activation_(activation), mode_(mode),
        versions_{SavedVersion::of(a), SavedVersion::of(w), SavedVersion{}} {
    if (bias) bias_shape_ = bias->shape();
    this->next = {edge_of(a), edge_of(w), bias ? edge_of(*bias) : nullptr};
  }
  std::string name() const override {
    const char* act = activation_ == GemmEpilogue::relu ? "relu(" : activation_ == GemmEpilogue::gelu ? "gelu_tanh(" : "(";
    return std::string("linear layer ") + act + "matmul" + (bias_shape_ ? " + bias)" : ")");
  }

  /// out = act(a @ w + bias), out a fresh row-major matrix; keeps what the backward reads.
  void forward(Matrix& out, const Vector* bias) {
    NoGradGuard no_grad;
    const std::int64_t m = out.size(0), n = out.size(1);
    const bool bias_fuses = bias && bias->size(0) == n && (bias->strides()[0] == 1 || n == 1);
    EpilogueBuffers<T> buffers;
    GemmEpilogue epilogue = GemmEpilogue::bias;
    if (bias_fuses) buffers.bias = bias->data();
    if (activation_ == GemmEpilogue::relu) {
      epilogue = bias_fuses ? GemmEpilogue::relu_bias : GemmEpilogue::relu;
    } else if (activation_ == GemmEpilogue::gelu) {
      const std::int64_t ld = round_up(n, 8);  // cuBLASLt's GELU aux: a multiple of 8
      pre_ = Matrix(Matrix::allocate({m, ld}).storage(), 0, {m, n}, {ld, 1});
      buffers.aux = pre_.data(), buffers.aux_ld = ld;
      epilogue = bias_fuses ? GemmEpilogue::gelu_aux_bias : GemmEpilogue::gelu_aux;
    }
    const bool whole = (bias_fuses || !bias) && (bias || activation_ != GemmEpilogue::none);
    if (!whole || !run_gemm(a_, w_, out, mode_, epilogue, buffers)) {
      // The product, then the rest as one elementwise pass.
      Matrix pre = activation_ == GemmEpilogue::gelu ? pre_ : out;
      run_gemm(a_, w_, pre, mode_);
      if (bias) evaluate(pre, pre + *bias);
      if (activation_ == GemmEpilogue::relu) evaluate(out, relu(out));
      if (activation_ == GemmEpilogue::gelu) evaluate(out, gelu_tanh(pre));
    }
  }
  /// Keeps the output the ReLU derivative reads, once it is attached to this node.
  void save_output(const Matrix& out) {
    if (activation_ != GemmEpilogue::relu) return;
    out_ = saved_data(out);
    versions_[2] = SavedVersion::of(out);
  }

  void apply(bool retain) override {
    require_not_released(*this);
    const Matrix g = this->take();
    if (g.defined() || dz_.defined()) {
      for (const auto& version : versions_) version.check(*this);
      backward(g);
    }
    dz_ = {}, db_ = {};
    if (!retain) a_ = {}, w_ = {}, out_ = {}, pre_ = {};
  }

 private:
  /// dz from the gradient of the output (and what a consumer handed over).
  Matrix pre_gradient(const Matrix& g) const {
    Matrix dz;
    if (g.defined()) {
      // (evaluated, never recorded: the functor has no derivative of its own)
      if (activation_ == GemmEpilogue::relu) evaluate(dz, make_map<TimesDerivative<Relu>>(g, out_));
      else if (activation_ == GemmEpilogue::gelu) evaluate(dz, make_map<TimesDerivative<GeluTanh>>(g, pre_));
      else dz = g;
    }
    if (!dz_.defined()) return dz;
    if (!dz.defined()) return dz_;
    Matrix total;
    evaluate(total, dz + dz_);
    return total;
  }

  /// When `a` is the output of a GELU LinearBackward that only this node sends a gradient
  /// to: da's GEMM applies that node's derivative (and computes its bias gradient) in its
  /// epilogue and hands both to it. Returns whether it did.
  bool fold_into_producer(const Matrix& dz) {
    auto* producer = dynamic_cast<LinearBackward*>(this->next[0].get());
    if (!producer || producer->activation_ != GemmEpilogue::gelu || !producer->pre_.defined() ||
        producer->graph_consumers.load(std::memory_order_relaxed) != 1 || producer->gradient.defined() ||
        producer->dz_.defined() || !a_.is_contiguous())
      return false;
    const bool bias_gradient = producer->next[2] && producer->bias_shape_ && (*producer->bias_shape_)[0] == a_.size(1);
    EpilogueBuffers<T> buffers;
    buffers.aux = producer->pre_.data(), buffers.aux_ld = producer->pre_.strides()[0];
    Vector db;
    if (bias_gradient) db = Vector::allocate({a_.size(1)}), buffers.bias = db.data();
    const Matrix dz_in = Matrix::allocate(a_.shape());
    if (!run_gemm(dz, w_.transpose(0, 1), dz_in, mode_, bias_gradient ? GemmEpilogue::dgelu_bgrad : GemmEpilogue::dgelu,
                  buffers))
      return false;
    producer->dz_ = dz_in, producer->db_ = db;
    return true;
  }

  /// dw = a^T dz, laid out as w, and when `db` is asked for, dz summed over its rows in the
  /// same GEMM's epilogue where the backend can (else *db stays undefined).
  Matrix weight_gradient(const Matrix& dz, Vector* db) const {
    EpilogueBuffers<T> buffers;
    Vector summed;
    if (db) summed = Vector::allocate({dz.size(1)}), buffers.bias = summed.data();
    const bool transposed = transposed_layout(w_);  // w used as weight.transpose(0, 1)
    const Matrix dw = transposed ? Matrix::allocate({w_.size(1), w_.size(0)}) : Matrix::allocate(w_.shape());
    // dw = a^T dz, or (dw^T =) dz^T a: dz is the right operand, or the left one.
    const Matrix l = transposed ? dz.transpose(0, 1) : a_.transpose(0, 1);
    const Matrix r = transposed ? a_ : dz;
    const GemmEpilogue epilogue = !db ? GemmEpilogue::none : transposed ? GemmEpilogue::bgrad_left : GemmEpilogue::bgrad_right;
    if (!run_gemm(l, r, dw, mode_, epilogue, buffers)) run_gemm(l, r, dw, mode_);
    else if (db) *db = summed;
    return transposed ? dw.transpose(0, 1) : dw;
  }

  void backward(const Matrix& g) {
    const BackwardNeeds needs{this->next};
    const Matrix dz = pre_gradient(g);
    Vector db = g.defined() ? Vector{} : db_;  // db_ covers the handed-over part of dz alone
    Matrix da, dw;
    // da first: it reads w, which a folded optimizer step then updates in place.
    if (needs[0] && !fold_into_producer(dz)) da = product_laid_like(a_, dz, w_.transpose(0, 1), mode_);
    if (needs[1]) {
      const auto a_t = a_.transpose(0, 1);
      if (const auto update = fold_offer(needs, 1, w_, a_t, dz)) fold_product(*update, w_, a_t, dz, mode_);
      else dw = weight_gradient(dz, needs[2] && !db.defined() && (*bias_shape_)[0] == dz.size(1) ? &db : nullptr);
    }
    if (needs[2] && !db.defined()) db = sum_to(dz, *bias_shape_);
    send(this->next[0], da);
    send(this->next[1], dw);
    send(this->next[2], db);
  }

  Matrix a_, w_;
  GemmEpilogue activation_;
  MathMode mode_;
  std::optional<Shape<1>> bias_shape_;
  std::array<SavedVersion, 3> versions_;  // a, w, and (ReLU) the output
  Matrix out_;                            // ReLU: the output, whose sign is the mask
  Matrix pre_;                            // GELU: the activation's input (cuBLASLt's aux)
  Matrix dz_;                             // handed over by the consumer (fold_into_producer)
  Vector db_;
};

/// Records dst = expr as one LinearBackward node when expr is a linear layer (see the file
/// comment) writing a new matrix; returns false, having done nothing, otherwise.
template <class T, int R, class D, class E>
bool record_linear(Tensor<T, R, D>& dst, const E& expr) {
  using Pattern = EpiloguePattern<E>;
  if constexpr (R != 2 || !Pattern::matches) {
    return false;
  } else {
    using Product = std::remove_cvref_t<decltype(Pattern::matmul(expr))>;
    using A = std::remove_cvref_t<decltype(Pattern::matmul(expr).lhs())>;
    using W = std::remove_cvref_t<decltype(Pattern::matmul(expr).rhs())>;
    if constexpr (!std::is_same_v<A, Tensor<T, 2, D>> || !std::is_same_v<W, Tensor<T, 2, D>> ||
                  !std::is_same_v<typename Product::value_type, T>) {
      return false;
    } else {
      const Tensor<T, 1, D>* bias = nullptr;
      if constexpr (Pattern::has_bias) {
        if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(Pattern::bias(expr))>, Tensor<T, 1, D>>) return false;
        else bias = &Pattern::bias(expr);
      }
      if (dst.defined()) return false;  // a write into an existing tensor: the general path
      const auto& product = Pattern::matmul(expr);
      constexpr GemmEpilogue activation =
          Pattern::epilogue == GemmEpilogue::bias ? GemmEpilogue::none
          : Pattern::epilogue == GemmEpilogue::relu || Pattern::epilogue == GemmEpilogue::relu_bias ? GemmEpilogue::relu
                                                                                                     : GemmEpilogue::gelu;
      auto node = std::make_shared<LinearBackward<T, D>>(product.lhs(), product.rhs(), bias, activation,
                                                         product.math_mode());
      dst = Tensor<T, 2, D>::allocate(assigned_shape(dst, expr));
      node->forward(dst, bias);
      attach(dst, node);
      node->save_output(dst);
      return true;
    }
  }
}

}  // namespace et::detail
