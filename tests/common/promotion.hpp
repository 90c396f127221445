// The element types in promotion order and PyTorch's promotion table, written out (the
// library's rule is computed; this is the table it must give): test_dtypes.cpp checks it
// statically, the random promotion family (random_promotion_cases.hpp) by values.
#pragma once

#include <et/half.hpp>

#include <cstdint>
#include <tuple>

namespace test {

// The eight element types, in promotion order.
using Types = std::tuple<bool, std::uint8_t, std::int32_t, std::int64_t, et::half, et::bfloat16, float, double>;
inline constexpr std::size_t type_count = std::tuple_size_v<Types>;
template <std::size_t I>
using TypeAt = std::tuple_element_t<I, Types>;

/// promoted[i][j]: the index in Types of the element type of (type i) + (type j).
constexpr int promoted[type_count][type_count] = {
    //   bool u8 i32 i64 half bf16 f32 f64
    {0, 1, 2, 3, 4, 5, 6, 7},  // bool
    {1, 1, 2, 3, 4, 5, 6, 7},  // uint8
    {2, 2, 2, 3, 4, 5, 6, 7},  // int32
    {3, 3, 3, 3, 4, 5, 6, 7},  // int64
    {4, 4, 4, 4, 4, 6, 6, 7},  // half
    {5, 5, 5, 5, 6, 5, 6, 7},  // bfloat16
    {6, 6, 6, 6, 6, 6, 6, 7},  // float
    {7, 7, 7, 7, 7, 7, 7, 7},  // double
};

}  // namespace test
