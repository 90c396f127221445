// Eigen views of host tensors and tensors over Eigen's memory, both without copying:
//
//   Eigen::Ref-like access:  auto m = et::as_eigen(t);   // t: Tensor<float, 2, Cpu>
//                            m.col(0).setZero();         // writes t's storage
//   the other way:           Eigen::MatrixXd a(3, 4);
//                            auto t = et::from_eigen(a); // Tensor<double, 2, Cpu>, borrows a
//
// as_eigen gives an Eigen::Map of a row-major matrix (rank 2) or a column vector (rank 1)
// with t's strides, whatever they are (transposed, sliced or broadcast views too: a
// broadcast view reads one element many times and must not be written). from_eigen takes
// any Eigen expression with direct access to its coefficients (Matrix, Array, Map, Block,
// Ref) and gives a rank-2 tensor with its strides; the Eigen object must outlive it.
// Element types Eigen and etensor share: float, double, int32, int64, bool.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <type_traits>

#include "et/device.hpp"
#include "et/interop/from_blob.hpp"
#include "et/tensor.hpp"

namespace et {
namespace detail {
template <class T>
concept EigenElement = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                       std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;
}  // namespace detail

template <detail::EigenElement T, class D>
  requires(!D::is_cuda)
auto as_eigen(const Tensor<T, 2, D>& t) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<Matrix, Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
  if (!t.defined()) throw Error("et: as_eigen() of an undefined tensor");
  return Map(t.data(), t.size(0), t.size(1), Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(t.strides()[0], t.strides()[1]));
}

template <detail::EigenElement T, class D>
  requires(!D::is_cuda)
auto as_eigen(const Tensor<T, 1, D>& t) {
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using Map = Eigen::Map<Vector, Eigen::Unaligned, Eigen::InnerStride<Eigen::Dynamic>>;
  if (!t.defined()) throw Error("et: as_eigen() of an undefined tensor");
  return Map(t.data(), t.size(0), Eigen::InnerStride<Eigen::Dynamic>(t.strides()[0]));
}

template <class Derived>
  requires(detail::EigenElement<typename Derived::Scalar> && (Derived::Flags & Eigen::DirectAccessBit) != 0)
auto from_eigen(Eigen::DenseBase<Derived>& m) {
  Derived& d = m.derived();
  return from_blob(cpu, d.data(), {std::int64_t(d.rows()), std::int64_t(d.cols())},
                   {std::int64_t(d.rowStride()), std::int64_t(d.colStride())});
}

}  // namespace et
