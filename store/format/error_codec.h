// The body of an error frame: a frame with kFlagResponse | kFlagError whose
// message is a serialized proto::ErrorResponse (docs/wire_format.md). The
// one place a failed Status becomes bytes on the wire and back, used by the
// RPC server (store/rpc/rpc_server.cc), the RPC client and the
// short-circuit channel (store/segd/short_circuit_server.cc,
// cache/segment_reader.cc through rpc::StatusFromErrorFrame).
//
// The code, the message and an errno attached with PosixError
// (src/status/posix_error.h) survive the round trip; other payloads do not.
//
// Thread-safe: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace logfs::format {

// A meta standby's refusal (docs/meta_ha.md "Clients"): kUnavailable with
// the active's advertised address ("" when the standby knows none) as a
// payload that survives the round trip.
absl::Status NotActiveMetaError(absl::string_view message, absl::string_view active_address);
// Whether `status` is such a refusal; then `*active_address` (if not null)
// is the address it names.
bool IsNotActiveMeta(const absl::Status& status, std::string* active_address = nullptr);

// Serializes `status`, which must not be OK (CHECK), into an error frame's
// message bytes.
std::string EncodeErrorBody(const absl::Status& status);

// Parses an error frame's message bytes back into the status it carries:
// never OK. An errno in the body gives PosixError(errno, message); a code of
// OK (no peer of ours sends it) reads as kUnknown; bytes that do not parse
// give kInternal "unparseable error response".
absl::Status DecodeErrorBody(absl::string_view body);

}  // namespace logfs::format
