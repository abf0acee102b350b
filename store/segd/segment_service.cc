#include "store/segd/segment_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/util/crc32c.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/unix_socket.h"
#include "store/segd/segd_metrics.h"

namespace logfs::segd {
namespace {

// This io thread has registered synced appends whose round is not
// requested yet (SegmentService::Append). Handle requests it after the
// last request of the burst (more_buffered false), which the server hands
// to this same thread right after the others (Frame::more_buffered). If
// that request never comes, its frame was bad and the server closed the
// connection, so no one waits for those answers; the sync thread's tick,
// or the next request this thread handles, makes the appends durable.
thread_local bool sync_owed = false;

proto::SegmentInfoResponse ToProto(const ReplicaInfo& info) {
  proto::SegmentInfoResponse response;
  response.set_segment_id(info.segment_id);
  response.set_epoch(info.epoch);
  response.set_length(info.length);
  response.set_durable_length(info.durable_length);
  response.set_sealed(info.sealed);
  response.set_corrupt(info.corrupt);
  return response;
}

void ReplyInfo(const rpc::Responder& responder, const absl::StatusOr<ReplicaInfo>& info) {
  if (!info.ok()) return responder.ReplyError(info.status());
  responder.Reply(ToProto(*info));
}

// Answers a waiter of the SyncThread.
SyncThread::Callback ReplyWhenDurable(const rpc::Responder& responder) {
  return [responder](absl::StatusOr<ReplicaInfo> info) { ReplyInfo(responder, info); };
}

template <typename Message>
bool Parse(const format::Frame& request, const rpc::Responder& responder, Message* message) {
  if (message->ParseFromString(request.message)) return true;
  responder.ReplyError(absl::InvalidArgumentError(
      absl::StrCat("unparseable request of type ", static_cast<int>(request.type))));
  return false;
}

}  // namespace

SegmentService::SegmentService(ReplicaStore* store, SyncThread* sync_thread, SegmentCopier* copier)
    : store_(store), sync_thread_(sync_thread), copier_(copier), boot_id_(rpc::HostBootId()) {}

void SegmentService::Handle(format::Frame request, rpc::Responder responder) {
  Dispatch(request, responder);
  if (!request.more_buffered && sync_owed) {
    // The last request of what one read brought: one round for the synced
    // appends before it, led by this thread unless one is in flight.
    sync_owed = false;
    sync_thread_->RequestRound(/*may_lead=*/true);
  }
}

void SegmentService::Dispatch(const format::Frame& request, const rpc::Responder& responder) {
  if (stopped_.load()) {
    return responder.ReplyError(absl::UnavailableError("segment server is stopping"));
  }
  switch (request.type) {
    case format::MessageType::kCreateSegment:
      return CreateSegment(request, responder);
    case format::MessageType::kAppend:
      return Append(request, responder);
    case format::MessageType::kSync:
      return Sync(request, responder);
    case format::MessageType::kRead:
      return Read(request, responder);
    case format::MessageType::kSegmentInfo:
      return SegmentInfo(request, responder);
    case format::MessageType::kSeal:
      return Seal(request, responder);
    case format::MessageType::kDeleteSegment:
      return DeleteSegment(request, responder);
    case format::MessageType::kCopySegment:
      return CopySegment(request, responder);
    case format::MessageType::kServerStats:
      return ServerStats(responder);
    case format::MessageType::kShortCircuitInfo:
      return ShortCircuitInfo(responder);
    default:
      return responder.ReplyError(absl::UnimplementedError(
          absl::StrCat("segment server does not serve type ", static_cast<int>(request.type))));
  }
}

void SegmentService::CreateSegment(const format::Frame& request, const rpc::Responder& responder) {
  proto::CreateSegmentRequest req;
  if (!Parse(request, responder, &req)) return;
  // Writes and fdatasyncs the state file (a reopen, also a copy of the
  // .crc file) and the directory: off the io thread (the client waits
  // for the answer before it appends).
  asio::post(file_pool_, [this, req, responder] {
    absl::StatusOr<MetaFence::Hold> admitted = Admit(req.meta_epoch());
    if (!admitted.ok()) return responder.ReplyError(admitted.status());
    if (req.reopen_length() > 0) {
      return ReplyInfo(responder,
                       store_->Reopen(req.segment_id(), req.epoch(), req.reopen_length()));
    }
    ReplyInfo(responder, store_->Create(req.segment_id(), req.epoch()));
  });
}

void SegmentService::Append(const format::Frame& request, const rpc::Responder& responder) {
  proto::AppendRequest req;
  if (!Parse(request, responder, &req)) return;
  auto info = store_->Append(req.segment_id(), req.epoch(), req.offset(), request.data,
                             req.crc32c());
  if (!info.ok()) return responder.ReplyError(info.status());
  appends_.fetch_add(1);
  GlobalSegdMetrics().append_bytes.fetch_add(request.data.size(), std::memory_order_relaxed);
  // Requests that came in the same read as later ones (a burst from a
  // client with many writers) owe their round to the last of them, which
  // Handle starts once it has taken them all: one round for the burst,
  // not one that the sync thread starts for the first append while this
  // thread is still taking the rest.
  const bool owe = req.sync() && (request.more_buffered || sync_owed);
  sync_owed = sync_owed || owe;
  // A lone append leads its round on this thread only if nothing more of
  // this connection is buffered: the io thread must not sit in a round
  // while the rest of a request waits to be read.
  sync_thread_->WaitDurable(req.segment_id(), info->incarnation, req.offset() + request.data.size(),
                            req.sync() && !owe, ReplyWhenDurable(responder),
                            /*may_lead=*/!request.more_bytes_buffered);
}

void SegmentService::Sync(const format::Frame& request, const rpc::Responder& responder) {
  proto::SyncRequest req;
  if (!Parse(request, responder, &req)) return;
  auto info = store_->Info(req.segment_id());
  if (!info.ok()) return responder.ReplyError(info.status());
  if (req.epoch() < info->epoch) {
    return responder.ReplyError(absl::FailedPreconditionError(absl::StrCat(
        "segment ", req.segment_id(), " is fenced: epoch ", req.epoch(), " < ", info->epoch)));
  }
  sync_thread_->WaitDurable(req.segment_id(), info->incarnation, info->length, /*sync=*/true,
                            ReplyWhenDurable(responder));
}

void SegmentService::Stop() {
  stopped_.store(true);
  read_pool_.stop();
  file_pool_.stop();
  read_pool_.join();
  file_pool_.join();
}

void SegmentService::Read(const format::Frame& request, const rpc::Responder& responder) {
  proto::ReadRequest req;
  if (!Parse(request, responder, &req)) return;
  asio::post(read_pool_, [this, req, responder] {
    const absl::Time start = absl::Now();
    auto read = store_->Read(req.segment_id(), req.offset(), req.length());
    GlobalSegdMetrics().read.Observe(absl::Now() - start);
    if (!read.ok()) return responder.ReplyError(read.status());
    proto::ReadResponse response;
    response.set_length(read->length);
    response.set_sealed(read->sealed);
    response.set_crc32c(util::Crc32c(read->data.data(), read->data.size()));
    responder.Reply(response, std::move(read->data));
  });
}

void SegmentService::SegmentInfo(const format::Frame& request, const rpc::Responder& responder) {
  proto::SegmentInfoRequest req;
  if (!Parse(request, responder, &req)) return;
  ReplyInfo(responder, store_->Info(req.segment_id()));
}

void SegmentService::Seal(const format::Frame& request, const rpc::Responder& responder) {
  proto::SealRequest req;
  if (!Parse(request, responder, &req)) return;
  // Four fdatasyncs: off the io thread. The appends this connection sent
  // before the seal were applied already (Append runs inline).
  asio::post(file_pool_, [this, req, responder] {
    absl::StatusOr<MetaFence::Hold> admitted = Admit(req.meta_epoch());
    if (!admitted.ok()) return responder.ReplyError(admitted.status());
    auto info = store_->Seal(req.segment_id(), req.epoch(), req.length());
    // Waiters past the sealed length fail now; those below it are durable.
    sync_thread_->Recheck(req.segment_id());
    ReplyInfo(responder, info);
  });
}

void SegmentService::DeleteSegment(const format::Frame& request, const rpc::Responder& responder) {
  proto::DeleteSegmentRequest req;
  if (!Parse(request, responder, &req)) return;
  asio::post(file_pool_, [this, req, responder] {
    absl::StatusOr<MetaFence::Hold> admitted = Admit(req.meta_epoch());
    if (!admitted.ok()) return responder.ReplyError(admitted.status());
    absl::Status status = store_->Delete(req.segment_id());
    sync_thread_->Recheck(req.segment_id());
    if (!status.ok()) return responder.ReplyError(status);
    responder.Reply(proto::Empty());
  });
}

void SegmentService::ServerStats(const rpc::Responder& responder) {
  proto::ServerStatsResponse response;
  response.set_appends(appends_.load());
  response.set_fdatasyncs(store_->fdatasync_count());
  response.set_sync_rounds(sync_thread_->sync_rounds());
  response.set_journal_wraps(store_->journal_wraps());
  response.set_server_id(store_->server_id());
  response.set_incarnation(incarnation_);
  if (rpc_server_ != nullptr) {
    response.set_tcp_connections(rpc_server_->connections_accepted(rpc::Transport::kTcp));
    response.set_unix_connections(rpc_server_->connections_accepted(rpc::Transport::kUnix));
    response.set_tcp_requests(rpc_server_->requests_read(rpc::Transport::kTcp));
    response.set_unix_requests(rpc_server_->requests_read(rpc::Transport::kUnix));
  }
  responder.Reply(response);
}

void SegmentService::ShortCircuitInfo(const rpc::Responder& responder) {
  proto::ShortCircuitInfoResponse response;
  response.set_boot_id(boot_id_);
  response.set_socket_path(short_circuit_socket_);
  response.set_rpc_socket_path(rpc_socket_);
  responder.Reply(response);
}

absl::StatusOr<MetaFence::Hold> SegmentService::Admit(uint64_t meta_epoch) {
  if (fence_ == nullptr) return MetaFence::Hold();
  return fence_->Admit(meta_epoch);
}

// The copy runs on the copier's thread, never on this io thread; an
// admission that raises the fence (a synced write) runs on the file pool.
// The copy does not keep the fence's hold: it may take seconds, and a new
// active must not wait for it; a copy admitted before a raise is one the
// deposed meta sent in time, and the new active learns of its replica
// from the server's report.
void SegmentService::CopySegment(const format::Frame& request, const rpc::Responder& responder) {
  proto::CopySegmentRequest req;
  if (!Parse(request, responder, &req)) return;
  if (copier_ == nullptr) return responder.ReplyError(absl::UnimplementedError("no copier"));
  auto admit_and_enqueue = [this, responder](proto::CopySegmentRequest req) {
    if (absl::Status admitted = Admit(req.meta_epoch()).status(); !admitted.ok()) {
      return responder.ReplyError(admitted);
    }
    copier_->Enqueue(std::move(req),
                     [responder](absl::StatusOr<ReplicaInfo> info) { ReplyInfo(responder, info); });
  };
  if (fence_ == nullptr || req.meta_epoch() <= fence_->highest()) {
    return admit_and_enqueue(std::move(req));  // no write: inline
  }
  asio::post(file_pool_, [admit_and_enqueue, req = std::move(req)]() mutable {
    admit_and_enqueue(std::move(req));
  });
}

}  // namespace logfs::segd
