// A PNG decoder just big enough for the plot tests: 8-bit RGB or RGBA,
// not interlaced (what rsvg-convert writes), inflated with zlib and
// unfiltered (PNG spec, ISO/IEC 15948 §9) into RGBA pixels. Not a general
// decoder; anything else is kUnimplemented.
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace logfs::testing {

struct PngImage {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgba;  // width * height * 4, row by row
};

// Errors: kInvalidArgument for a missing signature, a bad chunk or data
// that does not inflate to the image's size; kUnimplemented for another
// bit depth, colour type or interlacing.
absl::StatusOr<PngImage> DecodePng(const std::string& bytes);

// Pixels of each opaque colour, as "#rrggbb" (alpha < 255 is left out).
std::map<std::string, size_t> CountColours(const PngImage& image);

}  // namespace logfs::testing
