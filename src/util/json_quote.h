// A string as a JSON string literal (RFC 8259 section 7), for the few
// tools that print JSON by hand (`logfs status --format=json`); logfs has
// no JSON library and needs none for output this small.
//
//   absl::StrCat("{\"address\":", JsonQuote(address), "}")
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace logfs::util {

// `text` between double quotes with '"', '\\' and the control characters
// U+0000 to U+001F escaped (\b \f \n \r \t, else \u00XX). Valid UTF-8 is
// kept as it is; each byte that does not start a valid UTF-8 sequence
// (a stray continuation byte, an overlong form, a surrogate, a truncated
// sequence) becomes \ufffd, so the result is always valid JSON whatever
// bytes an error message or a server name holds.
std::string JsonQuote(absl::string_view text);

}  // namespace logfs::util
