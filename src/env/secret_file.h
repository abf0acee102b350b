// The cluster secret's file (`--cluster_secret_file`, README
// "Authentication"): read it only when nobody but its owner can read or
// write it, as ssh refuses a private key with loose permissions, and create
// one with mode 0600.
//
// Thread-safe (no shared state). Errors name the path.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace logfs::env {

// The secret's shortest length in bytes (256 bits).
inline constexpr size_t kSecretBytesMin = 32;
// And its longest: a key, not a document.
inline constexpr size_t kSecretBytesMax = 4096;

// The contents of the secret file at `path`, trailing whitespace (a
// newline of `openssl rand -hex 32 >FILE`) removed. kPermissionDenied if
// group or others may read or write it (the message gives its mode and the
// chmod that fixes it), kFailedPrecondition if it is not a regular file or
// holds fewer than kSecretBytesMin bytes, or more than kSecretBytesMax;
// kNotFound / errno statuses as open and read fail.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// Creates `path` with mode 0600 holding `contents`, durably (fsync of the
// file and its directory). kAlreadyExists if it exists (never replaced).
absl::Status CreateSecretFile(const std::string& path, absl::string_view contents);

}  // namespace logfs::env
