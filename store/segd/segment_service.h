// The segment server's request handler: decodes each segd request, runs it
// against the ReplicaStore and answers through the Responder, as
// docs/rpc.md ("Segment server") says. Appends and Syncs are answered by
// the SyncThread once durable; reads, creates, seals and deletes run on
// pools of their own; the rest is answered inline.
//
// Thread-safety: Handle may be called concurrently from any io thread.
// Requests of one connection arrive in order and Append runs inline, so
// one connection's appends reach the replica in the order they were sent.
// Reads run on a pool of their own: a pread of up to 8 MiB from a cold
// disk must not hold the io thread (one by default) and with it every
// other connection's appends (DESIGN §5: a large response must not hold
// back small ones). Creates, seals and deletes, which fdatasync files and
// directories, run on a second pool for the same reason: on a slow disk a
// roll of many segments at once would otherwise hold every append for
// seconds, and the writers would find this server dead instead of slow.
// A client waits for a create's answer before it appends to the segment,
// and the appends sent before a seal were applied when it is queued. The
// pool's two threads do not keep one connection's creates, seals and
// deletes in order: a client that pipelined a delete and a create of one
// id would have to wait for the first answer (every client waits today).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <string>

#include "store/format/frame.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/meta_fence.h"
#include "store/segd/replica_store.h"
#include "store/segd/segment_copier.h"
#include "store/segd/sync_thread.h"

namespace logfs::segd {

class SegmentService {
 public:
  // Keeps the pointers; they must outlive every Handle call. Without a
  // `copier`, CopySegment is kUnimplemented.
  SegmentService(ReplicaStore* store, SyncThread* sync_thread,
                 SegmentCopier* copier = nullptr);

  // What ShortCircuitInfo answers: the short-circuit socket's path (empty:
  // off). Call before serving.
  void set_short_circuit_socket(std::string path) { short_circuit_socket_ = std::move(path); }
  // What ShortCircuitInfo answers as the RPC Unix socket's path (empty:
  // none). Call before serving.
  void set_rpc_socket(std::string path) { rpc_socket_ = std::move(path); }
  // The server whose per-transport counters ServerStats reports (null:
  // zeros). Kept; must outlive every Handle call. Call before serving.
  void set_rpc_server(const rpc::RpcServer* server) { rpc_server_ = server; }
  // What ShortCircuitInfo answers as this host's id (default: the boot id).
  // Call before serving.
  void set_host_id(std::string host_id) { boot_id_ = std::move(host_id); }
  // This process's incarnation (store/segd/meta_registration.h), which ServerStats
  // reports with the server id. Call before serving.
  void set_incarnation(uint64_t incarnation) { incarnation_ = incarnation; }
  // Checks the meta_epoch of CreateSegment, Seal, DeleteSegment and
  // CopySegment against `fence` (store/segd/meta_fence.h): a refused one
  // gets format::MetaEpochFencedError and touches nothing. Null (the
  // default): no check. Kept; must outlive every Handle call. Call before
  // serving.
  void set_meta_fence(MetaFence* fence) { fence_ = fence; }

  // Serves one request. Bad messages get kInvalidArgument; after Stop every
  // request gets kUnavailable.
  void Handle(format::Frame request, rpc::Responder responder);

  // Refuses new requests from now on (kUnavailable); reads, creates,
  // seals and deletes running finish, those not yet started are dropped,
  // so their callers get
  // the Responder's kInternal "request dropped without a reply".
  void Stop();

  // Appends executed (accepted by the store) so far.
  uint64_t appends() const { return appends_.load(); }

 private:
  void Dispatch(const format::Frame& request, const rpc::Responder& responder);
  void CreateSegment(const format::Frame& request, const rpc::Responder& responder);
  void Append(const format::Frame& request, const rpc::Responder& responder);
  void Sync(const format::Frame& request, const rpc::Responder& responder);
  void Read(const format::Frame& request, const rpc::Responder& responder);
  void SegmentInfo(const format::Frame& request, const rpc::Responder& responder);
  void Seal(const format::Frame& request, const rpc::Responder& responder);
  void DeleteSegment(const format::Frame& request, const rpc::Responder& responder);
  void CopySegment(const format::Frame& request, const rpc::Responder& responder);
  void ServerStats(const rpc::Responder& responder);
  void ShortCircuitInfo(const rpc::Responder& responder);
  // Admits a command of `meta_epoch` (blocks for a synced write when it
  // raises the fence: call on a pool thread).
  absl::StatusOr<MetaFence::Hold> Admit(uint64_t meta_epoch);

  // Immutable after construction.
  ReplicaStore* const store_;
  SyncThread* const sync_thread_;
  SegmentCopier* const copier_;
  std::string boot_id_;               // the host id readers compare with theirs
  std::string short_circuit_socket_;  // set before serving
  std::string rpc_socket_;            // set before serving
  const rpc::RpcServer* rpc_server_ = nullptr;  // set before serving
  uint64_t incarnation_ = 0;          // set before serving
  MetaFence* fence_ = nullptr;        // set before serving
  asio::thread_pool read_pool_{2};
  asio::thread_pool file_pool_{2};  // creates, seals, deletes

  // Internally synchronized.
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> appends_{0};
};

}  // namespace logfs::segd
