// The production ClientDeps: meta through client::MetaClient (over the
// meta replicas' list), segment servers through client::SegdClient, reads
// through cache::SegmentReader (short-circuit reads of local replicas),
// writers through wal::FileWriter's RPC deps. One connection pool, on the
// executors' io threads.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fsclient/client.h"
#include "fsclient/client_deps.h"
#include "fsclient/executors.h"
#include "store/client/local_routes.h"
#include "store/client/meta_client.h"
#include "store/client/meta_endpoints.h"
#include "store/client/replica_reader.h"
#include "store/client/segd_client.h"
#include "store/rpc/client_pool.h"

namespace logfs::fsclient {
namespace {

client::MetaClientOptions MetaOptions(const ClientOptions& options) {
  client::MetaClientOptions meta;
  meta.timeout = options.rpc_timeout;
  meta.retry_window = options.meta_retry;
  return meta;
}

class RpcClientDeps final : public ClientDeps {
 public:
  RpcClientDeps(const ClientOptions& options, Executors& executors)
      : rpc_timeout_(options.rpc_timeout),
        pool_(executors.io(), options.cluster_key != nullptr ? options.cluster_key
                                                             : rpc::ProcessClusterKey()),
        local_routes_(options.local_transport == rpc::Transport::kUnix
                          ? std::make_unique<client::LocalRoutes>(
                                pool_, client::LocalRoutes::Options{options.host_id})
                          : nullptr),
        segd_(pool_),
        meta_(executors.io(), client::MetaEndpoints::OverPool(pool_, options.meta_address),
              MetaOptions(options)) {
    segd_.set_local_routes(local_routes_.get());
    cache::SegmentReaderOptions reader_options;
    reader_options.short_circuit = options.short_circuit;
    reader_options.host_id = options.host_id;
    reader_options.timeout = options.rpc_timeout;
    reader_options.replica_cache = options.replica_cache;
    segment_reader_ = std::make_unique<cache::SegmentReader>(segd_, reader_options);
  }

  absl::StatusOr<uint64_t> NewMount(const std::string& host) override {
    return meta_.NewMount(host);
  }
  absl::Status MountHeartbeat(const proto::MountHeartbeatRequest& request) override {
    return meta_.MountHeartbeat(request);
  }
  void ResumeMount(uint64_t mount_id, uint64_t last_call_seq, uint32_t cache_lease_ms) override {
    meta_.ResumeMount(mount_id, last_call_seq, cache_lease_ms);
  }
  uint64_t mount_id() const override { return meta_.mount_id(); }
  uint64_t last_call_seq() const override { return meta_.last_call_seq(); }
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name,
                                     const proto::CacheSession& cache) override {
    return meta_.Lookup(parent, name, cache);
  }
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino, const proto::CacheSession& cache) override {
    return meta_.GetAttr(ino, cache);
  }
  absl::StatusOr<proto::WatchCacheResponse> WatchCache(const proto::WatchCacheRequest& request,
                                                       absl::Duration timeout) override {
    return meta_.WatchCache(request, timeout);
  }
  uint32_t cache_lease_ms() const override { return meta_.cache_lease_ms(); }
  absl::StatusOr<proto::Inode> GetInode(uint64_t ino) override { return meta_.GetInode(ino); }
  absl::StatusOr<proto::Attr> SetAttr(proto::SetAttrRequest request) override {
    return meta_.SetAttr(std::move(request));
  }
  absl::StatusOr<proto::Attr> Create(proto::CreateRequest request) override {
    return meta_.Create(std::move(request));
  }
  absl::StatusOr<proto::Inode> CreateForWrite(proto::CreateRequest request) override {
    return meta_.CreateForWrite(std::move(request));
  }
  absl::Status Unlink(proto::UnlinkRequest request) override {
    return meta_.Unlink(std::move(request));
  }
  absl::StatusOr<proto::Attr> Link(proto::LinkRequest request) override {
    return meta_.Link(std::move(request));
  }
  absl::StatusOr<proto::Inode> CopyRange(proto::CopyRangeRequest request) override {
    return meta_.CopyRange(std::move(request));
  }
  absl::Status Rename(proto::RenameRequest request) override {
    return meta_.Rename(std::move(request));
  }
  absl::StatusOr<std::string> Readlink(uint64_t ino) override { return meta_.Readlink(ino); }
  absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino,
                                                 const std::string& start_after) override {
    return meta_.Readdir(ino, start_after);
  }
  absl::StatusOr<proto::StatFsResponse> StatFs() override { return meta_.StatFs(); }
  absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name,
                                       const proto::CacheSession& cache) override {
    return meta_.GetXattr(ino, name, cache);
  }
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) override {
    return meta_.ListXattr(ino);
  }
  absl::Status SetXattr(proto::SetXattrRequest request) override {
    return meta_.SetXattr(std::move(request));
  }
  absl::Status RemoveXattr(uint64_t ino, const std::string& name) override {
    return meta_.RemoveXattr(ino, name);
  }
  absl::StatusOr<proto::Inode> Open(uint64_t ino) override { return meta_.Open(ino); }
  absl::Status Release(uint64_t ino) override { return meta_.Release(ino); }
  absl::StatusOr<proto::Inode> OpenWrite(uint64_t ino, bool truncate) override {
    return meta_.OpenWrite(ino, truncate);
  }

  uint64_t AckedLengthOfOpenSegment(const proto::Segment& open, uint32_t quorum) override {
    return client::AckedLengthOfOpenSegment(segd_, open, quorum, rpc_timeout_);
  }
  absl::Status ReadSegments(cache::BlockCache* block_cache, uint64_t ino,
                            const std::vector<proto::Segment>& segments, uint64_t length,
                            uint64_t offset, uint64_t size, cache::ReadMode mode,
                            cache::ReadBuffer* out) override {
    return cache::ReadFile(block_cache, *segment_reader_, segments, length, offset, size,
                           {&meta_, ino}, mode, out);
  }
  std::shared_ptr<wal::FileWriter> NewWriter(wal::FileWriterOptions options,
                                             proto::Inode inode) override {
    return wal::FileWriter::Create(std::move(options), std::move(inode), &meta_, &segd_);
  }
  proto::CallId NextCallId() override { return meta_.NextCallId(); }

  cache::SegmentReaderStats ReaderStats() const override { return segment_reader_->stats(); }
  size_t LocalServers() const override {
    return local_routes_ != nullptr ? local_routes_->local_servers() : 0;
  }
  void TrimReplicas() override { segment_reader_->Trim(); }
  void Shutdown() override { pool_.ShutdownAll(); }

 private:
  const absl::Duration rpc_timeout_;
  rpc::ClientPool pool_;
  std::unique_ptr<client::LocalRoutes> local_routes_;  // null with local_transport kTcp
  client::SegdClient segd_;
  client::MetaClient meta_;
  std::unique_ptr<cache::SegmentReader> segment_reader_;
};

}  // namespace

std::unique_ptr<ClientDeps> NewRpcClientDeps(const ClientOptions& options, Executors& executors) {
  return std::make_unique<RpcClientDeps>(options, executors);
}

}  // namespace logfs::fsclient
