// The element types in promotion order and PyTorch's promotion table, written out (the
// library's rule is computed; this is the table it must give): test_dtypes.cpp checks it
// statically, the random promotion family (random_promotion_cases.hpp) by values.
#pragma once

#include <et/half.hpp>

#include <cstdint>
#include <tuple>

namespace test {

// The seven element types, in promotion order.
using Types = std::tuple<bool, std::int32_t, std::int64_t, et::half, et::bfloat16, float, double>;
template <std::size_t I>
using TypeAt = std::tuple_element_t<I, Types>;

/// promoted[i][j]: the index in Types of the element type of (type i) + (type j).
constexpr int promoted[7][7] = {
    //   bool i32 i64 half bf16 f32 f64
    {0, 1, 2, 3, 4, 5, 6},  // bool
    {1, 1, 2, 3, 4, 5, 6},  // int32
    {2, 2, 2, 3, 4, 5, 6},  // int64
    {3, 3, 3, 3, 5, 5, 6},  // half
    {4, 4, 4, 5, 4, 5, 6},  // bfloat16
    {5, 5, 5, 5, 5, 5, 6},  // float
    {6, 6, 6, 6, 6, 6, 6},  // double
};

}  // namespace test
