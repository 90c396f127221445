// Printing tensors (et/io/print.hpp): the exact text for each kind of value, summarized
// large tensors (only the shown elements are read), views, wrapping, and the undefined,
// empty and rank-0 cases.
#include "../common/reference.hpp"

#include <et/et.hpp>
#include <et/io/print.hpp>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

template <class T, int R>
std::string printed(const et::Tensor<T, R>& t) {
  std::ostringstream out;
  out << t;
  CHECK(out.str() == et::to_string(t));  // operator<< is to_string with the default options
  return out.str();
}

}  // namespace

TEST_CASE("printing: fixed, whole and scientific floats, one width per tensor", "[print]") {
  const auto m = et::from_vector(et::cpu, std::vector<float>{0.5f, -1.25f, 3.0f, 2.0f, 0.0f, -7.5f}, {2, 3});
  CHECK(printed(m) ==
        "tensor([[ 0.5000, -1.2500,  3.0000],\n"
        "        [ 2.0000,  0.0000, -7.5000]], shape=[2, 3], dtype=float32, device=cpu)");
  CHECK(printed(et::from_vector(et::cpu, std::vector<double>{1, -2, 30})) ==
        "tensor([ 1., -2., 30.], shape=[3], dtype=float64, device=cpu)");
  // Magnitudes more than 1000 apart, or below 1e-4, or from 1e8: scientific.
  CHECK(printed(et::from_vector(et::cpu, std::vector<float>{1e-5f, 1.0f})) ==
        "tensor([1.0000e-05, 1.0000e+00], shape=[2], dtype=float32, device=cpu)");
  CHECK(printed(et::from_vector(et::cpu, std::vector<double>{2e8, 1})) ==
        "tensor([2.0000e+08, 1.0000e+00], shape=[2], dtype=float64, device=cpu)");
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(printed(et::from_vector(et::cpu, std::vector<double>{nan, -inf, 0.25})) ==
        "tensor([   nan,   -inf, 0.2500], shape=[3], dtype=float64, device=cpu)");
  CHECK(et::to_string(et::from_vector(et::cpu, std::vector<float>{3.14159f}), {.precision = 2}) ==
        "tensor([3.14], shape=[1], dtype=float32, device=cpu)");
}

TEST_CASE("printing: integers, bool, 16-bit floats, rank 0, empty and undefined tensors", "[print]") {
  CHECK(printed(et::from_vector(et::cpu, std::vector<std::int64_t>{-3, 1200, 7}, {3, 1})) ==
        "tensor([[  -3],\n        [1200],\n        [   7]], shape=[3, 1], dtype=int64, device=cpu)");
  CHECK(printed(et::eval(et::arange<std::int32_t>(et::cpu, 4) > 1)) ==
        "tensor([False, False,  True,  True], shape=[4], dtype=bool, device=cpu)");
  CHECK(printed(et::eval(et::cast<et::half>(et::full<float>(et::cpu, {2}, 1.5f)))) ==
        "tensor([1.5000, 1.5000], shape=[2], dtype=float16, device=cpu)");
  CHECK(et::dtype_name<et::bfloat16> == std::string("bfloat16"));
  const et::Tensor<float, 0> scalar = et::sum(et::full<float>(et::cpu, {1}, 2.5f));
  CHECK(printed(scalar) == "tensor(2.5000, shape=[], dtype=float32, device=cpu)");
  CHECK(printed(et::zeros<float>(et::cpu, {2, 0})) == "tensor([[],\n        []], shape=[2, 0], dtype=float32, device=cpu)");
  CHECK(printed(et::Tensor<float, 2>{}) == "tensor(undefined, dtype=float32, device=cpu)");
}

TEST_CASE("printing: views print their own values; long rows wrap at the line width", "[print]") {
  const auto m = et::from_vector(et::cpu, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(printed(m.transpose(0, 1)) ==
        "tensor([[1, 4],\n        [2, 5],\n        [3, 6]], shape=[3, 2], dtype=int32, device=cpu)");
  CHECK(printed(m.select(1, 2)) == "tensor([3, 6], shape=[2], dtype=int32, device=cpu)");
  const std::string text = printed(et::eval(et::arange<float>(et::cpu, 30) + 0.5f));
  CHECK(text.find("\n") != std::string::npos);
  const std::string values = text.substr(0, text.find(", shape="));  // the suffix follows the last row
  std::istringstream lines(values);
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 80);
  CHECK(values.ends_with(" 29.5000]"));
}

TEST_CASE("printing: large tensors are summarized and only the shown elements are read", "[print]") {
  CHECK(printed(et::arange<std::int64_t>(et::cpu, 2000)) ==
        "tensor([   0,    1,    2, ..., 1997, 1998, 1999], shape=[2000], dtype=int64, device=cpu)");
  const auto grid = et::arange<std::int32_t>(et::cpu, 100 * 100).reshape({100, 100});
  CHECK(printed(grid) ==
        "tensor([[   0,    1,    2, ...,   97,   98,   99],\n"
        "        [ 100,  101,  102, ...,  197,  198,  199],\n"
        "        [ 200,  201,  202, ...,  297,  298,  299],\n"
        "        ...,\n"
        "        [9700, 9701, 9702, ..., 9797, 9798, 9799],\n"
        "        [9800, 9801, 9802, ..., 9897, 9898, 9899],\n"
        "        [9900, 9901, 9902, ..., 9997, 9998, 9999]], shape=[100, 100], dtype=int32, device=cpu)");
  // 2^40 elements (a broadcast view of one): copying them all could not work.
  const auto huge = et::ones<float>(et::cpu, {1}).expand({std::int64_t{1} << 40});
  CHECK(printed(huge) == "tensor([1., 1., 1., ..., 1., 1., 1.], shape=[1099511627776], dtype=float32, device=cpu)");
  CHECK(et::to_string(et::arange<std::int32_t>(et::cpu, 10), {.threshold = 4, .edge_items = 2}) ==
        "tensor([0, 1, ..., 8, 9], shape=[10], dtype=int32, device=cpu)");
}
