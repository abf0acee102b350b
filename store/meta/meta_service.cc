#include "store/meta/meta_service.h"

#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/util/log_rate_limit.h"
#include "store/format/message_type.h"
#include "store/format/wire_version.h"

namespace logfs::meta {
namespace {

// Parses the request of `frame` as Request and runs fn(request) ->
// StatusOr<Response>. An unparseable request is kInvalidArgument; the
// connection stays open.
template <typename Request, typename Fn>
MetaService::Reply Serve(const format::Frame& frame, Fn fn) {
  Request request;
  if (!request.ParseFromString(frame.message)) {
    return absl::InvalidArgumentError(absl::StrCat("unparseable ", request.GetTypeName(),
                                                   " (message type ", static_cast<int>(frame.type),
                                                   ")"));
  }
  auto response = fn(request);
  if (!response.ok()) return response.status();
  using Response = std::decay_t<decltype(*response)>;
  return std::make_unique<Response>(std::move(*response));
}

absl::StatusOr<proto::Empty> ToEmpty(const absl::Status& status) {
  if (!status.ok()) return status;
  return proto::Empty();
}

absl::StatusOr<proto::AttrResponse> AttrReply(absl::StatusOr<proto::Attr> attr) {
  if (!attr.ok()) return attr.status();
  proto::AttrResponse response;
  *response.mutable_attr() = std::move(*attr);
  return response;
}

absl::StatusOr<proto::InodeResponse> InodeReply(absl::StatusOr<proto::Inode> inode) {
  if (!inode.ok()) return inode.status();
  proto::InodeResponse response;
  *response.mutable_inode() = std::move(*inode);
  return response;
}

}  // namespace

MetaService::MetaService(Namespace* ns, int TEST_exit_before_reply_to_change,
                         MountCaches* caches)
    : ns_(ns),
      TEST_exit_before_reply_to_change_(TEST_exit_before_reply_to_change),
      caches_(caches) {}

template <typename Result>
Result MetaService::TEST_AfterChange(const proto::CallId& call, Result result) {
  if (TEST_exit_before_reply_to_change_ <= 0 || call.seq() == 0) return result;
  if (TEST_changes_.fetch_add(1) + 1 == TEST_exit_before_reply_to_change_) {
    std::fprintf(stderr,
                 "meta: TEST_exit_before_reply_to_change: exiting before the reply "
                 "to call %lu/%lu\n",
                 static_cast<unsigned long>(call.mount_id()),
                 static_cast<unsigned long>(call.seq()));
    std::_Exit(3);
  }
  return result;
}

namespace {
// A segment server's or mount's stated version (store/format/wire_version.h):
// refused, and logged here as at the refused end, unless meta shares one.
// A peer newer than meta is refused too: servers are upgraded before their
// clients, so mounts and segment servers stay within one minor release of
// each other.
absl::Status AdmitVersion(bool has, const proto::VersionRange& stated, absl::string_view role,
                          absl::string_view peer_name) {
  absl::Status admitted =
      format::CheckPeerVersion(format::OwnVersion("meta"), format::PeerVersion(has, stated, role),
                               peer_name, /*peer_may_be_newer=*/false);
  if (admitted.ok()) return admitted;
  // One rate limit per role, so that refused mounts do not hide a segd.
  if (role == "segd") {
    LOGFS_LOG_EVERY_MS(WARNING, 1000) << "refused: " << admitted.message();
  } else {
    LOGFS_LOG_EVERY_MS(WARNING, 1000) << "refused: " << admitted.message();
  }
  return admitted;
}
}  // namespace

// One handler per family of calls: servers and mounts here.
MetaService::Reply MetaService::Handle(const format::Frame& frame, proto::CallId* call) {
  Namespace& ns = *ns_;
  switch (frame.type) {
    case format::MessageType::kRegisterServer:
      return Serve<proto::RegisterServerRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::RegisterServerResponse> {
            RETURN_IF_ERROR(AdmitVersion(q.has_version(), q.version(), "segd", q.address()));
            ASSIGN_OR_RETURN(uint64_t id, ns.RegisterServer(q));
            proto::RegisterServerResponse response;
            response.set_server_id(id);
            response.set_cluster_id(ns.cluster_id());
            *response.mutable_version() = format::OwnVersion("meta");
            return response;
          });
    case format::MessageType::kHeartbeat:
      return Serve<proto::HeartbeatRequest>(frame, [&](const auto& q) { return ns.Heartbeat(q); });
    case format::MessageType::kNewMount:
      return Serve<proto::NewMountRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::NewMountResponse> {
            RETURN_IF_ERROR(AdmitVersion(q.has_version(), q.version(), "mount", q.host()));
            ASSIGN_OR_RETURN(uint64_t id, ns.NewMount());
            RememberSession(frame.connection_id, id);
            proto::NewMountResponse response;
            *response.mutable_version() = format::OwnVersion("meta");
            response.set_mount_id(id);
            if (caches_ != nullptr) {
              response.set_cache_lease_ms(
                  static_cast<uint32_t>(absl::ToInt64Milliseconds(caches_->options().lease)));
            }
            return response;
          });
    case format::MessageType::kMountHeartbeat:
      return Serve<proto::MountHeartbeatRequest>(frame, [&](const auto& q) {
        RememberSession(frame.connection_id, q.mount_id(), q.handing_off());
        return ToEmpty(ns.MountHeartbeat(
            q.mount_id(), std::vector<uint64_t>(q.writing_inos().begin(), q.writing_inos().end())));
      });
    case format::MessageType::kStatFs:
      return Serve<proto::Empty>(frame, [&](const auto&) { return ns.StatFs(); });
    case format::MessageType::kListServers:
      return Serve<proto::ListServersRequest>(
          frame, [&](const auto& q) { return ns.ListServers(q.start_server_id()); });
    case format::MessageType::kListSegments:
      return Serve<proto::ListSegmentsRequest>(
          frame, [&](const auto& q) { return ns.ListSegments(q.start_ino(), q.max_inodes()); });
    case format::MessageType::kReportBadReplica:
      return Serve<proto::ReportBadReplicaRequest>(
          frame, [&](const auto& q) { return ToEmpty(ns.ReportBadReplica(q)); });
    default:
      return HandleNames(frame, call);
  }
}

// Names and attributes.
MetaService::Reply MetaService::HandleNames(const format::Frame& frame, proto::CallId* call) {
  Namespace& ns = *ns_;
  auto note = [call](const proto::CallId& id) {
    if (call != nullptr) *call = id;
  };
  switch (frame.type) {
    // A cache session's read is recorded before it reads (MountCaches).
    case format::MessageType::kLookup:
      return Serve<proto::LookupRequest>(frame, [&](const auto& q) {
        if (caches_ == nullptr || !q.has_cache()) return AttrReply(ns.Lookup(q.parent(), q.name()));
        caches_->RecordDir(q.cache(), q.parent());
        // The inode is known only after the read: a change of it published
        // meanwhile may not have waited for this session, so read again.
        constexpr int kReads = 3;
        for (int read = 1;; ++read) {
          const uint64_t position = caches_->ReadPosition();
          absl::StatusOr<proto::Attr> attr = ns.Lookup(q.parent(), q.name());
          const bool last = read == kReads;  // then the session gets an invalidation
          if (!attr.ok() || !caches_->RecordInodeRead(q.cache(), attr->ino(), position, last) ||
              last) {
            return AttrReply(std::move(attr));
          }
        }
      });
    case format::MessageType::kGetAttr:
      return Serve<proto::GetAttrRequest>(frame, [&](const auto& q) {
        if (caches_ != nullptr && q.has_cache()) caches_->RecordInode(q.cache(), q.ino());
        return AttrReply(ns.GetAttr(q.ino()));
      });
    case format::MessageType::kGetInode:
      return Serve<proto::GetAttrRequest>(
          frame, [&](const auto& q) { return InodeReply(ns.GetInode(q.ino())); });
    case format::MessageType::kSetAttr:
      return Serve<proto::SetAttrRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), AttrReply(ns.SetAttr(q)));
      });
    case format::MessageType::kCreate:
      return Serve<proto::CreateRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::AttrResponse> {
            note(q.call());
            if (q.open_for_write_mount_id() == 0) {
              return TEST_AfterChange(q.call(), AttrReply(ns.Create(q)));
            }
            absl::StatusOr<proto::Inode> inode = ns.CreateForWrite(q);
            if (!inode.ok()) return TEST_AfterChange(q.call(), inode.status());
            proto::AttrResponse response;
            *response.mutable_attr() = inode->attr();
            *response.mutable_inode() = std::move(*inode);
            return TEST_AfterChange(q.call(), response);
          });
    case format::MessageType::kUnlink:
      return Serve<proto::UnlinkRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(),
                                ToEmpty(ns.Unlink(q.parent(), q.name(), q.directory(), q.call())));
      });
    case format::MessageType::kRename:
      return Serve<proto::RenameRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), ToEmpty(ns.Rename(q)));
      });
    case format::MessageType::kLink:
      return Serve<proto::LinkRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), AttrReply(ns.Link(q)));
      });
    case format::MessageType::kClone:
      return Serve<proto::CloneRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), AttrReply(ns.Clone(q)));
      });
    case format::MessageType::kSnapshot:
      return Serve<proto::SnapshotRequest>(frame, [&](const auto& q) {
        note(q.call());
        return ns.Snapshot(q);
      });
    case format::MessageType::kCheckShares:
      return Serve<proto::CheckSharesRequest>(frame, [&](const auto& q) {
        return ns.CheckShares(q);
      });
    case format::MessageType::kReadlink:
      return Serve<proto::GetAttrRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::ReadlinkResponse> {
            ASSIGN_OR_RETURN(std::string target, ns.Readlink(q.ino()));
            proto::ReadlinkResponse response;
            response.set_target(std::move(target));
            return response;
          });
    case format::MessageType::kReaddir:
      return Serve<proto::ReaddirRequest>(
          frame, [&](const auto& q) { return ns.Readdir(q.ino(), q.start_after()); });
    default:
      return HandleFiles(frame, call);
  }
}

// Xattrs, opens, write leases and seals.
MetaService::Reply MetaService::HandleFiles(const format::Frame& frame, proto::CallId* call) {
  Namespace& ns = *ns_;
  auto note = [call](const proto::CallId& id) {
    if (call != nullptr) *call = id;
  };
  switch (frame.type) {
    case format::MessageType::kSetXattr:
      return Serve<proto::SetXattrRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), ToEmpty(ns.SetXattr(q)));
      });
    case format::MessageType::kGetXattr:
      return Serve<proto::GetXattrRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::GetXattrResponse> {
            if (caches_ != nullptr && q.has_cache()) caches_->RecordInode(q.cache(), q.ino());
            ASSIGN_OR_RETURN(std::string value, ns.GetXattr(q.ino(), q.name()));
            proto::GetXattrResponse response;
            response.set_value(std::move(value));
            return response;
          });
    case format::MessageType::kListXattr:
      return Serve<proto::GetAttrRequest>(
          frame, [&](const auto& q) -> absl::StatusOr<proto::ListXattrResponse> {
            ASSIGN_OR_RETURN(auto names, ns.ListXattr(q.ino()));
            proto::ListXattrResponse response;
            for (auto& name : names) response.add_names(std::move(name));
            return response;
          });
    case format::MessageType::kRemoveXattr:
      return Serve<proto::GetXattrRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), ToEmpty(ns.RemoveXattr(q.ino(), q.name(), q.call())));
      });
    case format::MessageType::kOpen:
      return Serve<proto::OpenRequest>(
          frame, [&](const auto& q) { return InodeReply(ns.Open(q.ino(), q.mount_id())); });
    case format::MessageType::kRelease:
      return Serve<proto::ReleaseRequest>(
          frame, [&](const auto& q) { return ToEmpty(ns.Release(q.ino(), q.mount_id())); });
    case format::MessageType::kOpenWrite:
      return Serve<proto::OpenWriteRequest>(
          frame, [&](const auto& q) { return InodeReply(ns.OpenWrite(q)); });
    case format::MessageType::kRecoverLease:
      return Serve<proto::RecoverLeaseRequest>(
          frame, [&](const auto& q) { return InodeReply(ns.RecoverLease(q.ino())); });
    case format::MessageType::kSealSegment:
      return Serve<proto::SealSegmentRequest>(frame, [&](const auto& q) {
        note(q.call());
        return InodeReply(ns.SealSegment(q));
      });
    case format::MessageType::kCopyRange:
      return Serve<proto::CopyRangeRequest>(frame, [&](const auto& q) {
        note(q.call());
        return TEST_AfterChange(q.call(), InodeReply(ns.CopyRange(q)));
      });
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("meta does not serve message type ", static_cast<int>(frame.type)));
  }
}

void MetaService::RememberSession(uint64_t connection, uint64_t mount_id, bool handing_off) {
  absl::MutexLock lock(&sessions_mu_);
  Session& session = mount_sessions_[connection];
  session.mount_id = mount_id;
  session.handing_off = handing_off;
}

uint64_t MetaService::LockingChangeMount(const format::Frame& frame) {
  auto mount_of = [&frame](auto request) -> uint64_t {
    return request.ParseFromString(frame.message) ? request.call().mount_id() : 0;
  };
  switch (frame.type) {
    case format::MessageType::kCreate:
      return mount_of(proto::CreateRequest());
    case format::MessageType::kUnlink:
      return mount_of(proto::UnlinkRequest());
    case format::MessageType::kRename:
      return mount_of(proto::RenameRequest());
    case format::MessageType::kLink:
      return mount_of(proto::LinkRequest());
    case format::MessageType::kClone:
      return mount_of(proto::CloneRequest());
    case format::MessageType::kCopyRange:
      return mount_of(proto::CopyRangeRequest());
    case format::MessageType::kSetAttr:
      return mount_of(proto::SetAttrRequest());
    case format::MessageType::kSetXattr:
      return mount_of(proto::SetXattrRequest());
    case format::MessageType::kRemoveXattr:
      return mount_of(proto::GetXattrRequest());
    default:
      return 0;
  }
}

std::optional<uint64_t> MetaService::TakeSession(uint64_t connection_id) {
  absl::MutexLock lock(&sessions_mu_);
  auto it = mount_sessions_.find(connection_id);
  if (it == mount_sessions_.end()) return std::nullopt;
  const Session session = it->second;
  mount_sessions_.erase(it);
  // A daemon handing its session to a successor: the session goes on,
  // over the successor's connection if it has one yet, else heard from
  // again within the lease timeout (MountHeartbeatRequest.handing_off).
  if (session.handing_off) return std::nullopt;
  for (const auto& [connection, other] : mount_sessions_) {
    if (other.mount_id == session.mount_id) return std::nullopt;
  }
  return session.mount_id;
}

}  // namespace logfs::meta
