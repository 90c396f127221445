// Interop on the CPU: from_blob (borrowed and owned memory, strides, bad input), DLPack
// export and import (through the DLPack structs themselves), and Eigen views both ways.
#include "../common/reference.hpp"

#include <et/et.hpp>
#include <et/interop/dlpack.hpp>
#include <et/interop/eigen.hpp>
#include <et/interop/from_blob.hpp>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

using Catch::Matchers::Contains;

TEST_CASE("from_blob: a tensor over borrowed memory, no copy, with strides", "[interop]") {
  std::vector<float> memory(12);
  std::iota(memory.begin(), memory.end(), 0.0f);
  auto t = et::from_blob(et::cpu, memory.data(), {3, 4});
  CHECK(t.data() == memory.data());
  CHECK(t.strides() == et::Shape<2>{4, 1});
  t += 1.0f;  // writes the borrowed memory
  CHECK(memory[11] == 12.0f);
  // Every other column, as a strided view of the same memory.
  auto columns = et::from_blob(et::cpu, memory.data(), {3, 2}, {4, 2});
  CHECK(columns.to_vector() == std::vector<float>{1, 3, 5, 7, 9, 11});
  CHECK(et::eval(et::sum(columns)).item() == 36.0f);
  auto empty = et::from_blob(et::cpu, static_cast<float*>(nullptr), {0, 5});  // nothing to point at
  CHECK(empty.numel() == 0);
}

TEST_CASE("from_blob: a deleter runs once, when the last tensor over the memory is gone", "[interop]") {
  int deleted = 0;
  auto* memory = new std::int64_t[6]{1, 2, 3, 4, 5, 6};
  {
    auto t = et::from_blob(et::cpu, memory, {2, 3}, [&](std::int64_t* p) {
      delete[] p;
      ++deleted;
    });
    auto view = t.transpose(0, 1);
    t = et::Tensor<std::int64_t, 2>{};
    CHECK(deleted == 0);
    CHECK(view.to_vector() == std::vector<std::int64_t>{1, 4, 2, 5, 3, 6});
  }
  CHECK(deleted == 1);
}

TEST_CASE("from_blob: bad input is an et:: error", "[interop][errors]") {
  std::vector<float> memory(8);
  CHECK_THROWS_WITH(et::from_blob(et::cpu, static_cast<float*>(nullptr), {2}), Contains("null pointer"));
  CHECK_THROWS_AS(et::from_blob(et::cpu, memory.data(), {2, -1}), et::ShapeError);
  CHECK_THROWS_WITH(et::from_blob(et::cpu, memory.data(), {2, 2}, {2, -1}), Contains("negative stride"));
  auto* bytes = reinterpret_cast<char*>(memory.data());
  CHECK_THROWS_WITH(et::from_blob(et::cpu, reinterpret_cast<float*>(bytes + 1), {2}), Contains("not aligned"));
}

TEST_CASE("from_blob and DLPack refuse strides whose reach passes 64 bits of bytes", "[interop][errors][dlpack]") {
  std::vector<float> memory(8);
  const std::int64_t big = std::int64_t{1} << 62;
  CHECK_THROWS_AS(et::from_blob(et::cpu, memory.data(), {2, 2}, {big, 1}), et::ShapeError);
  CHECK_THROWS_WITH(et::from_blob(et::cpu, memory.data(), {2, 2}, {big, 1}),
                    Contains("et: from_blob: shape [2, 2] with strides [4611686018427387904, 1] reaches more bytes "
                             "than fit in 64 bits"));
  CHECK_THROWS_WITH(et::from_blob(et::cpu, memory.data(), {2, 2}, {big, big}), Contains("more bytes than fit"));
  CHECK_THROWS_WITH(et::from_blob(et::cpu, memory.data(), {std::int64_t{1} << 61}), Contains("more bytes than fit"));
  // Reaches that fit are views like any other; a stride on an axis of extent 1 or 0 reaches nothing.
  CHECK(et::from_blob(et::cpu, memory.data(), {1, 2}, {big, 1}).clone().to_vector() == std::vector<float>{0, 0});
  CHECK(et::from_blob(et::cpu, memory.data(), {0, 2}, {big, big}).numel() == 0);
  CHECK(et::from_blob(et::cpu, memory.data(), {2, 2}, {4, 1}).clone().to_vector() == std::vector<float>{0, 0, 0, 0});

  std::int64_t shape[2] = {2, 2}, strides[2] = {big, 1};
  DLManagedTensor managed{};
  managed.dl_tensor = {memory.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
  CHECK_THROWS_AS((et::from_dlpack<float, 2>(et::cpu, &managed)), et::ShapeError);
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &managed)),
                    Contains("et: from_dlpack: shape [2, 2] with strides") && !Contains("from_blob"));
  strides[1] = -1;
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &managed)), Contains("from_dlpack: negative stride"));
  strides[0] = 2;
  strides[1] = 1;
  managed.dl_tensor.data = nullptr;
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &managed)),
                    Contains("et: from_dlpack(cpu, ...): a null pointer"));
  // The dlpack fuzz target's finding (2026-12-07, 3.2M executions): a null data pointer with
  // a byte_offset of 2^64 - 256 was accepted as the pointer 2^64 - 256.
  managed.dl_tensor.byte_offset = ~std::uint64_t{255};
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &managed)),
                    Contains("et: from_dlpack(cpu, ...): a null pointer"));
  managed.dl_tensor.data = memory.data();  // an offset that wraps the address space
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &managed)),
                    Contains("byte_offset 18446744073709551360 passes the end of the address space"));
  managed.dl_tensor.byte_offset = 0;
  // A layout whose last byte would lie past the end of the address space.
  auto* top = reinterpret_cast<float*>((UINTPTR_MAX - 15) & ~std::uintptr_t{15});
  CHECK_THROWS_WITH(et::from_blob(et::cpu, top, {8}), Contains("pass the end of the address space"));
}

TEST_CASE("DLPack: a device type this header does not know is read as a number", "[interop][errors][dlpack]") {
  std::vector<float> memory(2);
  std::int64_t shape[1] = {2};
  DLManagedTensor managed{};
  managed.dl_tensor = {memory.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  const std::int32_t foreign = 999;
  std::memcpy(&managed.dl_tensor.device.device_type, &foreign, sizeof foreign);
  CHECK_THROWS_WITH((et::from_dlpack<float, 1>(et::cpu, &managed)),
                    Contains("the DLPack tensor is float32, rank 1, device type 999"));
}

TEST_CASE("DLPack: export shares the storage and describes it; import takes ownership", "[interop][dlpack]") {
  auto t = et::eval(et::arange<float>(et::cpu, 12) * 0.5f);
  auto m = t.view({3, 4}).transpose(0, 1);  // 4 x 3, strides {1, 4}
  DLManagedTensor* managed = m.to_dlpack();
  const DLTensor& dl = managed->dl_tensor;
  CHECK(dl.data == m.data());
  CHECK(dl.device.device_type == kDLCPU);
  CHECK(dl.ndim == 2);
  CHECK((dl.dtype.code == kDLFloat && dl.dtype.bits == 32 && dl.dtype.lanes == 1));
  CHECK((dl.shape[0] == 4 && dl.shape[1] == 3 && dl.strides[0] == 1 && dl.strides[1] == 4));
  CHECK(dl.byte_offset == 0);
  const long before = t.storage().use_count();
  auto back = et::from_dlpack<float, 2>(et::cpu, managed);  // now owns `managed`
  CHECK(back.data() == m.data());
  CHECK(back.to_vector() == m.to_vector());
  back = et::Tensor<float, 2>{};  // the last owner: the deleter releases the exported reference
  CHECK(t.storage().use_count() == before - 1);
}

TEST_CASE("DLPack: import from a producer's own structs (offset, no strides, deleter)", "[interop][dlpack]") {
  struct Producer {
    std::vector<std::int32_t> values{10, 11, 12, 13, 14, 15, 16};
    std::int64_t shape[2] = {2, 3};
    DLManagedTensor managed{};
    int* deleted = nullptr;
  };
  int deleted = 0;
  auto* producer = new Producer;
  producer->deleted = &deleted;
  DLTensor& dl = producer->managed.dl_tensor;
  dl.data = producer->values.data();
  dl.byte_offset = sizeof(std::int32_t);  // the tensor starts at the second value
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLInt, 32, 1};
  dl.shape = producer->shape;
  dl.strides = nullptr;  // contiguous
  producer->managed.manager_ctx = producer;
  producer->managed.deleter = [](DLManagedTensor* self) {
    auto* owner = static_cast<Producer*>(self->manager_ctx);
    ++*owner->deleted;
    delete owner;
  };
  // A mismatch leaves the DLPack tensor with its owner.
  CHECK_THROWS_WITH((et::from_dlpack<float, 2>(et::cpu, &producer->managed)),
                    Contains("the DLPack tensor is int32, rank 2, cpu"));
  CHECK_THROWS_WITH((et::from_dlpack<std::int32_t, 3>(et::cpu, &producer->managed)), Contains("rank 2"));
  CHECK(deleted == 0);
  {
    auto t = et::from_dlpack<std::int32_t, 2>(et::cpu, &producer->managed);
    CHECK(t.strides() == et::Shape<2>{3, 1});
    CHECK(t.to_vector() == std::vector<std::int32_t>{11, 12, 13, 14, 15, 16});
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
}

TEST_CASE("DLPack: bool, 16-bit floats and rank 0 round trip", "[interop][dlpack]") {
  const auto mask = et::eval(et::arange<std::int32_t>(et::cpu, 5) > 2);
  DLManagedTensor* m = mask.to_dlpack();
  CHECK((m->dl_tensor.dtype.code == 6 && m->dl_tensor.dtype.bits == 8));
  CHECK(et::from_dlpack<bool, 1>(et::cpu, m).to_vector() == std::vector<bool>{false, false, false, true, true});
  const auto h = et::eval(et::cast<et::bfloat16>(et::full<float>(et::cpu, {2}, 1.5f)));
  DLManagedTensor* b = h.to_dlpack();
  CHECK((b->dl_tensor.dtype.code == kDLBfloat && b->dl_tensor.dtype.bits == 16));
  CHECK(float(et::from_dlpack<et::bfloat16, 1>(et::cpu, b).to_vector()[1]) == 1.5f);
  const et::Tensor<double, 0> s = et::sum(et::full<double>(et::cpu, {3}, 2.0));
  DLManagedTensor* z = s.to_dlpack();
  CHECK(z->dl_tensor.ndim == 0);
  CHECK(et::from_dlpack<double, 0>(et::cpu, z).item() == 6.0);
  CHECK_THROWS_WITH((et::Tensor<float, 1>{}.to_dlpack()), Contains("undefined"));
}

TEST_CASE("Eigen: maps of host tensors and tensors over Eigen matrices, both ways without copies", "[interop]") {
  auto t = et::eval(et::arange<double>(et::cpu, 6).view({2, 3}));
  auto map = et::as_eigen(t);
  CHECK((map.rows() == 2 && map.cols() == 3 && map(1, 2) == 5.0));
  map.col(0).setConstant(-1.0);  // writes t
  CHECK(t.to_vector() == std::vector<double>{-1, 1, 2, -1, 4, 5});
  auto transposed = et::as_eigen(t.transpose(0, 1));
  CHECK((transposed.rows() == 3 && transposed(2, 1) == 5.0));
  CHECK(et::as_eigen(t.select(0, 1))(2) == 5.0);

  Eigen::MatrixXf a(2, 3);  // column-major
  a << 1, 2, 3, 4, 5, 6;
  auto from = et::from_eigen(a);
  CHECK(from.strides() == et::Shape<2>{1, 2});
  CHECK(from.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  from *= 2.0f;  // writes a
  CHECK(a(1, 2) == 12.0f);
  auto block = a.block(0, 1, 2, 2);
  CHECK(et::from_eigen(block).to_vector() == std::vector<float>{4, 6, 10, 12});
}
