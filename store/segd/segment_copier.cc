#include "store/segd/segment_copier.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/util/crc32c.h"

namespace logfs::segd {

SegmentCopier::SegmentCopier(ReplicaStore* store, SegmentCopierOptions options)
    : store_(store),
      options_(options),
      work_(asio::make_work_guard(io_)),
      clients_(io_) {
  // Started last: they use every member.
  io_thread_ = std::thread([this] { io_.run(); });
  worker_ = std::thread([this] { Run(); });
}

SegmentCopier::~SegmentCopier() { Stop(); }

void SegmentCopier::Enqueue(proto::CopySegmentRequest request, Callback done) {
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      refused = absl::UnavailableError("segment server is stopping");
    } else if (queue_.size() >= kCopyQueueMax) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("segment server has ", kCopyQueueMax, " copies queued"));
    } else {
      queue_.push_back(Job{std::move(request), std::move(done)});
      return;
    }
  }
  done(refused);
}

bool SegmentCopier::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void SegmentCopier::Stop() {
  std::deque<Job> dropped;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    dropped.swap(queue_);
  }
  for (Job& job : dropped) job.done(absl::UnavailableError("segment server is stopping"));
  clients_.ShutdownAll();  // a running copy's read fails now
  if (worker_.joinable()) worker_.join();
  work_.reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
}

void SegmentCopier::Run() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SegmentCopier* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->stop_ || !c->queue_.empty();
          },
          this));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job.done(Copy(job.request));
  }
}

absl::StatusOr<ReplicaInfo> SegmentCopier::Copy(const proto::CopySegmentRequest& request) {
  const uint64_t segment_id = request.segment_id();
  auto existing = store_->Info(segment_id);
  if (existing.ok() || !absl::IsNotFound(existing.status())) {
    // Not listed by meta here (it copies only to servers that do not hold
    // the segment): a leftover of an earlier copy or roll, or a replica meta
    // dropped as corrupt (whose flag a restart forgets). Never trust it:
    // start over from a good source.
    RETURN_IF_ERROR(store_->Delete(segment_id));
  }
  absl::Status last = absl::InvalidArgumentError("no source address");
  for (const std::string& source : request.source_addresses()) {
    if (Stopping()) return absl::UnavailableError("segment server is stopping");
    auto copied = CopyFrom(source, request);
    if (copied.ok()) return copied;
    last = copied.status();
    LOG(WARNING) << "copying segment " << segment_id << " from " << source << ": " << last;
    store_->Delete(segment_id).IgnoreError();  // best effort: the next copy deletes it too
  }
  return last;
}

absl::StatusOr<ReplicaInfo> SegmentCopier::CopyFrom(const std::string& source,
                                                    const proto::CopySegmentRequest& request) {
  const uint64_t segment_id = request.segment_id();
  const uint64_t length = request.length();
  RETURN_IF_ERROR(store_->Create(segment_id, request.epoch()).status());
  uint64_t offset = 0;
  // Each round moves `offset` forward by at least one byte.
  while (offset < length) {
    proto::ReadRequest read;
    read.set_segment_id(segment_id);
    read.set_offset(offset);
    read.set_length(
        static_cast<uint32_t>(std::min<uint64_t>(format::kReadBytesMax, length - offset)));
    ASSIGN_OR_RETURN(client::ReadReply reply,
                     segd_.Read(source, read, absl::Milliseconds(options_.rpc_timeout_ms)));
    const proto::ReadResponse& response = reply.response;
    const std::string& data = reply.data;
    if (!response.sealed() || response.length() != length || data.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("source ", source, " has segment ", segment_id, " at length ",
                       response.length(), response.sealed() ? " sealed" : " unsealed",
                       ", want sealed at ", length));
    }
    const uint32_t crc = util::Crc32c(data.data(), data.size());
    if (crc != response.crc32c()) {
      return absl::DataLossError(absl::StrCat("crc32c mismatch reading segment ", segment_id,
                                              " at ", offset, " from ", source));
    }
    RETURN_IF_ERROR(store_->Append(segment_id, request.epoch(), offset, data, crc).status());
    offset += data.size();
  }
  // Seal fdatasyncs the data and persists the sealed state.
  return store_->Seal(segment_id, request.epoch(), length);
}

}  // namespace logfs::segd
