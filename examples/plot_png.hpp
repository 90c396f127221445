// A line chart written as a PNG file, for the examples' training curves, with no library:
// the pixels are deflated with the fixed Huffman code and one kind of match (a repeat of the
// previous pixel), which is enough for a chart's runs of one color (a few kilobytes).
//
//   Chart chart(640, 360);
//   chart.panel(0, 0.0, 2.5);                  // two panels side by side, each with its y range
//   chart.line(0, values, Chart::blue);         // one curve: its points spread over the panel
//   chart.write("curves.png");
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace example {

class Chart {
 public:
  using Color = std::array<std::uint8_t, 3>;
  static constexpr Color blue{31, 119, 180}, orange{255, 127, 14}, grey{200, 200, 200}, black{40, 40, 40};

  Chart(int width, int height, int panels = 2) : width_(width), height_(height), panels_(panels), ranges_(panels) {
    pixels_.assign(std::size_t(width) * std::size_t(height) * 3, 255);
  }

  /// Panel p's y range; draws its frame and ten horizontal grid lines.
  void panel(int p, double lo, double hi) {
    ranges_[std::size_t(p)] = {lo, hi};
    const auto [x0, y0, x1, y1] = frame(p);
    for (int k = 1; k < 10; ++k) segment(x0, y0 + (y1 - y0) * k / 10, x1, y0 + (y1 - y0) * k / 10, grey, 1);
    segment(x0, y0, x1, y0, black, 1), segment(x0, y1, x1, y1, black, 1);
    segment(x0, y0, x0, y1, black, 1), segment(x1, y0, x1, y1, black, 1);
  }

  /// A curve in panel p through `values`, evenly spaced from the left edge to the right.
  void line(int p, const std::vector<double>& values, Color color) {
    const auto [x0, y0, x1, y1] = frame(p);
    const auto [lo, hi] = ranges_[std::size_t(p)];
    auto at = [&](std::size_t i) {
      const double t = values.size() > 1 ? double(i) / double(values.size() - 1) : 0.0;
      const double v = std::clamp((values[i] - lo) / (hi - lo), 0.0, 1.0);
      return std::array<int, 2>{x0 + int(std::lround(t * (x1 - x0))), y1 - int(std::lround(v * (y1 - y0)))};
    };
    for (std::size_t i = 1; i < values.size(); ++i) {
      const auto a = at(i - 1), b = at(i);
      segment(a[0], a[1], b[0], b[1], color, 2);
    }
  }

  void write(const std::string& path) const {
    std::vector<std::uint8_t> raw;  // each row: filter byte 0, then RGB
    for (int y = 0; y < height_; ++y) {
      raw.push_back(0);
      raw.insert(raw.end(), pixels_.begin() + std::ptrdiff_t(y) * width_ * 3, pixels_.begin() + std::ptrdiff_t(y + 1) * width_ * 3);
    }
    std::vector<std::uint8_t> zlib{0x78, 0x01};
    deflate(raw, zlib);
    std::uint32_t a = 1, b = 0;  // Adler-32
    for (const std::uint8_t v : raw) a = (a + v) % 65521, b = (b + a) % 65521;
    append32(zlib, (b << 16) | a);
    std::vector<std::uint8_t> header;
    append32(header, std::uint32_t(width_)), append32(header, std::uint32_t(height_));
    header.insert(header.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, no interlace
    std::vector<std::uint8_t> file{0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    chunk(file, "IHDR", header), chunk(file, "IDAT", zlib), chunk(file, "IEND", {});
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
  }

 private:
  std::array<int, 4> frame(int p) const {
    const int w = width_ / panels_, margin = 20;
    return {p * w + margin, margin, (p + 1) * w - margin, height_ - margin};
  }
  void dot(int x, int y, Color c, int size) {
    for (int dy = 0; dy < size; ++dy)
      for (int dx = 0; dx < size; ++dx)
        if (x + dx >= 0 && x + dx < width_ && y + dy >= 0 && y + dy < height_)
          std::copy(c.begin(), c.end(), pixels_.begin() + (std::ptrdiff_t(y + dy) * width_ + x + dx) * 3);
  }
  void segment(int x0, int y0, int x1, int y1, Color c, int size) {  // Bresenham
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int err = dx + dy;;) {
      dot(x0, y0, c, size);
      if (x0 == x1 && y0 == y1) return;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  /// One final deflate block with the fixed Huffman code (RFC 1951, 3.2.6): literals, and
  /// runs that repeat the bytes 3 back (the previous pixel) as length/distance pairs.
  static void deflate(const std::vector<std::uint8_t>& in, std::vector<std::uint8_t>& out) {
    std::uint32_t bits = 0;
    int count = 0;
    auto put = [&](std::uint32_t value, int n) {  // n bits, least significant first
      bits |= value << count;
      for (count += n; count >= 8; count -= 8, bits >>= 8) out.push_back(std::uint8_t(bits));
    };
    auto code = [&](std::uint32_t value, int n) {  // a Huffman code: most significant bit first
      for (int i = n - 1; i >= 0; --i) put((value >> i) & 1u, 1);
    };
    auto symbol = [&](int s) {
      if (s < 144) code(0x30 + s, 8);
      else if (s < 256) code(0x190 + s - 144, 9);
      else if (s < 280) code(s - 256, 7);
      else code(0xC0 + s - 280, 8);
    };
    static constexpr int base[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
                                   67, 83, 99, 115, 131, 163, 195, 227, 258};
    static constexpr int extra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                    4, 4, 4, 4, 5, 5, 5, 5, 0};
    put(1, 1), put(1, 2);  // the final block, fixed Huffman codes
    for (std::size_t i = 0; i < in.size();) {
      std::size_t run = 0;
      while (i >= 3 && i + run < in.size() && run < 258 && in[i + run] == in[i + run - 3]) ++run;
      if (run < 3) {
        symbol(in[i++]);
        continue;
      }
      int k = 28;
      while (base[k] > int(run)) --k;
      symbol(257 + k), put(std::uint32_t(int(run) - base[k]), extra[k]);
      code(2, 5);  // distance 3: code 2, no extra bits
      i += run;
    }
    symbol(256);
    if (count > 0) out.push_back(std::uint8_t(bits));
  }
  static void append32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    out.insert(out.end(), {std::uint8_t(v >> 24), std::uint8_t(v >> 16), std::uint8_t(v >> 8), std::uint8_t(v)});
  }
  static void chunk(std::vector<std::uint8_t>& file, const char* type, const std::vector<std::uint8_t>& data) {
    append32(file, std::uint32_t(data.size()));
    const std::size_t start = file.size();
    file.insert(file.end(), type, type + 4);
    file.insert(file.end(), data.begin(), data.end());
    std::uint32_t crc = 0xFFFFFFFFu;  // CRC-32 of type and data
    for (std::size_t i = start; i < file.size(); ++i) {
      crc ^= file[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    append32(file, ~crc);
  }

  int width_, height_, panels_;
  std::vector<std::array<double, 2>> ranges_;
  std::vector<std::uint8_t> pixels_;
};

}  // namespace example
