// Internal (included by device.hpp): the messages for operands on two different
// devices (and for a non-blocking copy with pageable host memory), one specialization per pair of the CPU and cuda:0..7 (one HGX node). A C++20
// static_assert message must be a literal, and the first error line a user reads must
// name both devices; each message also sits on its own source line, because nvcc's
// front end echoes that line under the error. Other pairs get the general message.
// et.hpp includes this file first: the include chain g++ prints above the error is then
// two lines, part of keeping the whole report within 10 lines (tests/compile_fail).
#pragma once

namespace et::detail {

template <class Tag>
inline constexpr bool never = false;

template <int Low, int High, class Tag = void>
struct devices_meet {
  static_assert(never<Tag>, "et: operands on two different devices cannot meet in one expression or assignment; copy one across explicitly with .to(device)");
};

template <class Tag>
struct devices_meet<-1, 0, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:0 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<0>)");
};
template <class Tag>
struct devices_meet<-1, 1, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:1 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<1>)");
};
template <class Tag>
struct devices_meet<-1, 2, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:2 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<2>)");
};
template <class Tag>
struct devices_meet<-1, 3, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:3 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<3>)");
};
template <class Tag>
struct devices_meet<-1, 4, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:4 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<4>)");
};
template <class Tag>
struct devices_meet<-1, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<-1, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<-1, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cpu and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cpu) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<0, 1, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:1 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<1>)");
};
template <class Tag>
struct devices_meet<0, 2, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:2 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<2>)");
};
template <class Tag>
struct devices_meet<0, 3, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:3 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<3>)");
};
template <class Tag>
struct devices_meet<0, 4, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:4 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<4>)");
};
template <class Tag>
struct devices_meet<0, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<0, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<0, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:0 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<0>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<1, 2, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:2 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<2>)");
};
template <class Tag>
struct devices_meet<1, 3, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:3 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<3>)");
};
template <class Tag>
struct devices_meet<1, 4, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:4 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<4>)");
};
template <class Tag>
struct devices_meet<1, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<1, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<1, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:1 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<1>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<2, 3, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:2 and cuda:3 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<2>) or .to(et::cuda<3>)");
};
template <class Tag>
struct devices_meet<2, 4, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:2 and cuda:4 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<2>) or .to(et::cuda<4>)");
};
template <class Tag>
struct devices_meet<2, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:2 and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<2>) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<2, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:2 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<2>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<2, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:2 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<2>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<3, 4, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:3 and cuda:4 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<3>) or .to(et::cuda<4>)");
};
template <class Tag>
struct devices_meet<3, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:3 and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<3>) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<3, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:3 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<3>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<3, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:3 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<3>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<4, 5, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:4 and cuda:5 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<4>) or .to(et::cuda<5>)");
};
template <class Tag>
struct devices_meet<4, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:4 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<4>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<4, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:4 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<4>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<5, 6, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:5 and cuda:6 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<5>) or .to(et::cuda<6>)");
};
template <class Tag>
struct devices_meet<5, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:5 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<5>) or .to(et::cuda<7>)");
};
template <class Tag>
struct devices_meet<6, 7, Tag> {
  static_assert(never<Tag>, "et: operands on cuda:6 and cuda:7 cannot meet in one expression or assignment; copy one across explicitly with .to(et::cuda<6>) or .to(et::cuda<7>)");
};

// One device (same_devices in device.hpp): nothing to report.
template <int Index, class Tag>
struct devices_meet<Index, Index, Tag> {};

// Tensor::to(dev, et::non_blocking) from or to pageable host memory (Cpu) and a GPU.
template <bool PageableToGpu, bool GpuToPageable, class Tag = void>
struct non_blocking_copy {};
template <class Tag>
struct non_blocking_copy<true, false, Tag> {
  static_assert(never<Tag>, "et: a non-blocking copy to a GPU needs page-locked memory, or it would block (or race): pin the source first, x.pin().to(dev, et::non_blocking)");
};
template <class Tag>
struct non_blocking_copy<false, true, Tag> {
  static_assert(never<Tag>, "et: a non-blocking copy from a GPU needs a page-locked destination, or it would block (or race): copy with .to(et::pinned, et::non_blocking)");
};

}  // namespace et::detail
