// Versions of what logfs processes say to each other and write to etcd
// (docs/OPERATIONS.md "Upgrade", docs/rpc.md "Versions"). Release 0.N
// speaks wire version N, and every version down to kWireVersionMin, so a
// cluster upgrades one process at a time with at most one minor release
// between any two of its processes (HDFS's rolling upgrade, where the
// NameNode refuses a DataNode of an unsupported software version at
// registration, is the model).
//
// Each process states its range where it opens a session with another:
// a mount in NewMount, a segment server in RegisterServer (meta answers
// with its own range in both), the active meta in every journal record it
// appends (standbys check it before they apply it). Meta admits only
// segment servers and mounts that overlap its range, which bounds what
// mounts and segment servers (which have no session of their own) meet.
// A process that states nothing is logfs 0.1, which predates this
// handshake: wire version 1.
//
// Thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "store/format/logfs.pb.h"

namespace logfs::format {

inline constexpr uint32_t kWireVersion = 2;     // release 0.2
inline constexpr uint32_t kWireVersionMin = 1;  // the oldest peer it works with: 0.1
// What a message without a VersionRange means: logfs 0.1.
inline constexpr uint32_t kWireVersionUnstated = 1;

// This process's range: kWireVersionMin..kWireVersion (or the test
// override), `role` ("mount", "segd", "meta") and its release (Version()).
proto::VersionRange OwnVersion(absl::string_view role);

// A peer's range as stated in a message (`has` false: it stated none, so
// it is logfs 0.1), with `role` filled in if the peer left it empty.
proto::VersionRange PeerVersion(bool has, const proto::VersionRange& stated,
                                absl::string_view role);

// OK if `self` and `peer` share a wire version (and, with
// `peer_may_be_newer` false, as meta asks of mounts and segment servers,
// the peer is not newer than `self`: servers are upgraded before their
// clients, which keeps any two processes within one minor release). Else
// kFailedPrecondition
// with one line that names both sides (role, release, range, `peer_name`:
// its address or host) and which one to upgrade, e.g. "logfs mount 0.1.0
// at h4 speaks wire versions 1..1, this meta (logfs 0.3.0) 2..3: upgrade
// the mount (docs/OPERATIONS.md \"Upgrade\")". Both ends log it.
absl::Status CheckPeerVersion(const proto::VersionRange& self, const proto::VersionRange& peer,
                              absl::string_view peer_name, bool peer_may_be_newer = true);

// Whether `status` is such a refusal, from either end (its code and the
// fixed words " speaks wire versions " of its one line: the message is the
// part of an error that crosses the wire). A process refused so exits with
// kExitVersionRefused, which the units do not restart (the refusal holds
// until one side is upgraded).
bool IsVersionRefusal(const absl::Status& status);
inline constexpr int kExitVersionRefused = 78;  // EX_CONFIG (sysexits.h)

// Tests (--TEST_wire_versions=MIN:MAX): the range OwnVersion states.
// 0, 0: the built-in one.
void SetWireVersionsForTest(uint32_t min, uint32_t max);

}  // namespace logfs::format
