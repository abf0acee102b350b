// A status as a person reads it: its code and message, without the
// payloads that absl::Status::ToString appends ("[logfs/errno='20']"),
// which are for code, not for the terminal. Thread-safe: a pure function.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace logfs {

// "UNAUTHENTICATED: the peer has no secret", or "OK". Use it where a
// status becomes part of another status's message or of what a command
// prints; logs may keep ToString's payloads.
std::string StatusText(const absl::Status& status);

}  // namespace logfs
