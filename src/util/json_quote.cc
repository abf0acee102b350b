#include "src/util/json_quote.h"

#include <cstdint>
#include <cstdio>

namespace logfs::util {
namespace {

// The length of the valid UTF-8 sequence at the start of `s` (1 to 4), or
// 0 if it does not start with one (RFC 3629 section 4: no overlong forms,
// no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint8_t second_min = 0x80, second_max = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) second_min = 0xa0;  // overlong below U+0800
    if (lead == 0xed) second_max = 0x9f;  // surrogates U+D800..U+DFFF
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) second_min = 0x90;  // overlong below U+10000
    if (lead == 0xf4) second_max = 0x8f;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, 0xc0, 0xc1 or 0xf5..0xff
  }
  if (s.size() < length) return 0;
  if (byte(1) < second_min || byte(1) > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  while (!text.empty()) {
    const char c = text[0];
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out.append("\\ufffd");
      text.remove_prefix(1);
      continue;
    }
    if (length > 1) {
      out.append(text.data(), length);
      text.remove_prefix(length);
      continue;
    }
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out.append(escaped);
        } else {
          out.push_back(c);
        }
    }
    text.remove_prefix(1);
  }
  out.push_back('"');
  return out;
}

}  // namespace logfs::util
