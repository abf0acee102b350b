#include "tests/png_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"

namespace logfs::testing {
namespace {

uint32_t Be32(const std::string& b, size_t at) {
  return (uint32_t{static_cast<uint8_t>(b[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(b[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(b[at + 2])} << 8) | static_cast<uint8_t>(b[at + 3]);
}

uint8_t Paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

absl::StatusOr<PngImage> DecodePng(const std::string& bytes) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kSignature, 8) != 0) {
    return absl::InvalidArgumentError("no PNG signature");
  }
  PngImage image;
  int channels = 0;
  std::string idat;
  size_t at = 8;
  bool ended = false;
  while (at + 12 <= bytes.size() && !ended) {
    const uint32_t length = Be32(bytes, at);
    const std::string type = bytes.substr(at + 4, 4);
    if (at + 12 + length > bytes.size()) return absl::InvalidArgumentError("truncated chunk");
    const std::string data = bytes.substr(at + 8, length);
    if (type == "IHDR") {
      if (length != 13) return absl::InvalidArgumentError("bad IHDR");
      image.width = Be32(data, 0);
      image.height = Be32(data, 4);
      const int depth = static_cast<uint8_t>(data[8]), colour = static_cast<uint8_t>(data[9]);
      const int interlace = static_cast<uint8_t>(data[12]);
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0) {
        return absl::UnimplementedError(absl::StrFormat(
            "bit depth %d, colour type %d, interlace %d", depth, colour, interlace));
      }
      channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat += data;
    } else if (type == "IEND") {
      ended = true;
    }
    at += 12 + length;
  }
  if (channels == 0 || !ended) return absl::InvalidArgumentError("no IHDR or IEND chunk");
  const size_t stride = size_t{image.width} * channels;
  std::vector<uint8_t> raw((stride + 1) * image.height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_size != raw.size()) {
    return absl::InvalidArgumentError("IDAT does not inflate to the image size");
  }
  std::vector<uint8_t> pixels(stride * image.height);
  for (uint32_t y = 0; y < image.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &pixels[y * stride];
    const uint8_t* up = y > 0 ? &pixels[(y - 1) * stride] : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? out[i - channels] : 0;
      const int b = up != nullptr ? up[i] : 0;
      const int c = up != nullptr && i >= static_cast<size_t>(channels) ? up[i - channels] : 0;
      switch (filter) {
        case 0:
          out[i] = in[i];
          break;
        case 1:
          out[i] = in[i] + a;
          break;
        case 2:
          out[i] = in[i] + b;
          break;
        case 3:
          out[i] = in[i] + (a + b) / 2;
          break;
        case 4:
          out[i] = in[i] + Paeth(a, b, c);
          break;
        default:
          return absl::InvalidArgumentError(absl::StrFormat("row %d: filter %d", y, filter));
      }
    }
  }
  image.rgba.resize(size_t{image.width} * image.height * 4);
  for (size_t p = 0; p < size_t{image.width} * image.height; ++p) {
    for (int k = 0; k < 3; ++k) image.rgba[p * 4 + k] = pixels[p * channels + k];
    image.rgba[p * 4 + 3] = channels == 4 ? pixels[p * channels + 3] : 255;
  }
  return image;
}

std::map<std::string, size_t> CountColours(const PngImage& image) {
  std::map<std::string, size_t> counts;
  for (size_t p = 0; p + 3 < image.rgba.size(); p += 4) {
    if (image.rgba[p + 3] != 255) continue;
    ++counts[absl::StrFormat("#%02x%02x%02x", image.rgba[p], image.rgba[p + 1], image.rgba[p + 2])];
  }
  return counts;
}

}  // namespace logfs::testing
