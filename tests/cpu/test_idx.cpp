// IDX files (data::read_idx_images, read_idx_labels): files written here with known bytes,
// read back exactly; every kind of broken file an et::Error that names the file and what
// it found, without reading past the file's end or allocating what the header claims.
#include "../common/files.hpp"

#include <catch2/catch.hpp>

#include <et/data/idx.hpp>
#include <et/et.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

using Catch::Matchers::Contains;

namespace {

using test::TempFile;
using Bytes = std::vector<unsigned char>;

/// An IDX file's bytes: magic (0, 0, type, rank), big-endian extents, then `values`.
Bytes idx_bytes(unsigned type, const std::vector<std::uint32_t>& extents, const Bytes& values) {
  Bytes out = {0, 0, static_cast<unsigned char>(type), static_cast<unsigned char>(extents.size())};
  for (const std::uint32_t e : extents)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<unsigned char>(e >> shift));
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

}  // namespace

TEST_CASE("IDX: images and labels read back exactly, labels as int64", "[data][idx]") {
  Bytes pixels(3 * 2 * 4);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>(i * 11 + 3);
  pixels.back() = 255;
  const TempFile images("images.idx", idx_bytes(0x08, {3, 2, 4}, pixels));
  const et::Tensor<std::uint8_t, 3, et::Cpu> x = et::data::read_idx_images(images.path);
  CHECK(x.shape() == et::Shape<3>{3, 2, 4});
  CHECK(x.to_vector() == std::vector<std::uint8_t>(pixels.begin(), pixels.end()));
  CHECK(x.is_contiguous());

  const TempFile labels("labels.idx", idx_bytes(0x08, {4}, {0, 9, 255, 7}));
  const et::Tensor<std::int64_t, 1, et::Cpu> y = et::data::read_idx_labels(labels.path);
  CHECK(y.to_vector() == std::vector<std::int64_t>{0, 9, 255, 7});

  // Empty arrays are arrays: zero images of 28 x 28, zero labels; extents up to 2^32 - 1
  // beside a zero extent hold no values.
  const TempFile none("none.idx", idx_bytes(0x08, {0, 28, 28}, {}));
  CHECK(et::data::read_idx_images(none.path).shape() == et::Shape<3>{0, 28, 28});
  const TempFile wide("wide.idx", idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0}, {}));
  CHECK(et::data::read_idx_images(wide.path).shape() == et::Shape<3>{0xFFFFFFFFll, 0xFFFFFFFFll, 0});
  const TempFile no_labels("nolabels.idx", idx_bytes(0x08, {0}, {}));
  CHECK(et::data::read_idx_labels(no_labels.path).numel() == 0);
}

TEST_CASE("IDX: broken files are et::Errors naming the file and the fault", "[data][idx][errors]") {
  auto images_fail = [](const Bytes& bytes, const std::string& message) {
    const TempFile file("bad.idx", bytes);
    INFO(message);
    CHECK_THROWS_AS(et::data::read_idx_images(file.path), et::Error);
    CHECK_THROWS_WITH(et::data::read_idx_images(file.path),
                      Contains("et: read_idx_images: " + file.path) && Contains(message));
  };
  images_fail({}, "not an IDX file: 0 bytes");
  images_fail({0, 0, 8}, "not an IDX file: 3 bytes");
  images_fail({0x1F, 0x8B, 8, 0, 0, 0}, "a gzip stream, not an IDX file: unpack it first");
  images_fail({'P', 'K', 3, 4, 0, 0}, "it begins with 0x50 0x4B, not two zero bytes");
  images_fail(idx_bytes(0x0D, {1, 1, 1}, {0, 0, 0, 0}), "holds float32 values (type 0x0D); images are unsigned bytes");
  images_fail(idx_bytes(0x42, {1, 1, 1}, {0}), "holds unknown values (type 0x42)");
  images_fail(idx_bytes(0x08, {4}, {1, 2, 3, 4}), "holds a rank-1 array; images are rank 3 (count, rows, columns)");
  images_fail({0, 0, 8, 3, 0, 0, 0, 1, 0, 0}, "truncated: 10 bytes, shorter than its 16-byte header");
  images_fail(idx_bytes(0x08, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7}),
              "truncated: its header gives 2 x 2 x 2 values, the file holds 7 bytes after its 16-byte header");
  images_fail(idx_bytes(0x08, {1, 2, 2}, {1, 2, 3, 4, 5}), "1 bytes after the 1 x 2 x 2 values its header gives");
  // Extents whose product passes 64 bits: refused from the file's size, nothing allocated.
  images_fail(idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {1}),
              "truncated: its header gives 4294967295 x 4294967295 x 4294967295 values");

  const TempFile images("images3.idx", idx_bytes(0x08, {1, 1, 2}, {5, 6}));
  CHECK_THROWS_WITH(et::data::read_idx_labels(images.path),
                    Contains("et: read_idx_labels: ") && Contains("holds a rank-3 array; labels are rank 1 (count)"));
  const TempFile ints("ints.idx", idx_bytes(0x0C, {1}, {0, 0, 0, 1}));
  CHECK_THROWS_WITH(et::data::read_idx_labels(ints.path), Contains("holds int32 values (type 0x0C); labels are unsigned bytes"));

  const std::string missing = test::temporary_path("missing.idx");
  CHECK_THROWS_WITH(et::data::read_idx_images(missing), Contains(missing) && Contains("cannot open it"));
  const std::string directory = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(et::data::read_idx_labels(directory), Contains(directory) && Contains("a directory, not a file"));
  // A path with a NUL byte would open the file named by its part before the NUL: refused.
  const TempFile real("real.idx", idx_bytes(0x08, {1, 1, 2}, {5, 6}));
  CHECK_THROWS_WITH(et::data::read_idx_images(real.path + std::string(1, '\0') + "other"),
                    Contains("holds a NUL byte at offset " + std::to_string(real.path.size())) && Contains("\\0other"));
}
