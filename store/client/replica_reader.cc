#include "store/client/replica_reader.h"

#include <glog/logging.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "src/util/crc32c.h"

namespace logfs::client {
namespace {

// Tells meta (asynchronously) that `replica` of `segment` failed its
// checksum.
void ReportBadReplica(const BadReplicaReporter& reporter, const proto::Segment& segment,
                      const proto::Replica& replica, const absl::Status& status) {
  if (reporter.meta == nullptr) return;
  proto::ReportBadReplicaRequest request;
  request.set_segment_id(segment.id());
  request.set_server_id(replica.server_id());
  request.set_reason(std::string(status.message()));
  request.set_ino(reporter.ino);
  reporter.meta->ReportBadReplica(
      request, [segment_id = segment.id(), address = replica.address()](absl::Status s) {
        if (s.ok()) return;
        LOG(WARNING) << "reporting bad replica of segment " << segment_id << " on " << address
                     << " to meta: " << s;
      });
}

}  // namespace

absl::StatusOr<std::string> ReadSegmentRange(SegdClient& segd, const proto::Segment& segment,
                                             uint64_t offset, uint64_t size, absl::Duration timeout,
                                             const BadReplicaReporter& reporter) {
  proto::ReadRequest request;
  request.set_segment_id(segment.id());
  request.set_offset(offset);
  request.set_length(static_cast<uint32_t>(size));
  absl::Status last = absl::UnavailableError("segment has no replicas");
  for (const auto& replica : segment.replicas()) {
    absl::StatusOr<ReadReply> read = segd.Read(replica.address(), request, timeout);
    absl::Status s = read.status();
    // The server's own kDataLoss: its copy failed its chunk CRCs (a bad
    // response checksum below is the wire's fault, not the replica's).
    if (absl::IsDataLoss(s)) ReportBadReplica(reporter, segment, replica, s);
    if (s.ok() && util::Crc32c(read->data.data(), read->data.size()) != read->response.crc32c()) {
      s = absl::DataLossError("read checksum mismatch");
    }
    if (s.ok() && read->data.size() < size) {
      s = absl::OutOfRangeError(absl::StrCat("replica has ", offset + read->data.size(), " bytes"));
    }
    if (s.ok()) return std::move(read->data);
    LOG(WARNING) << "read of segment " << segment.id() << " from " << replica.address()
                 << " failed, trying next replica: " << s;
    last = s;
  }
  return PosixError(EIO, absl::StrCat("no replica of segment ", segment.id(),
                                      " can serve the read: ", last.message()));
}

uint64_t AckedLengthOfOpenSegment(SegdClient& segd, const proto::Segment& segment,
                                  uint32_t ack_quorum, absl::Duration timeout) {
  std::vector<std::string> addresses;
  for (const auto& r : segment.replicas()) addresses.push_back(r.address());
  std::vector<uint64_t> durable;
  for (const auto& info : segd.SegmentInfoEach(addresses, segment.id(), timeout)) {
    durable.push_back(info.ok() ? info->durable_length() : 0);
  }
  if (ack_quorum == 0 || durable.size() < ack_quorum) return 0;
  std::nth_element(durable.begin(), durable.begin() + (ack_quorum - 1), durable.end(),
                   std::greater<uint64_t>());
  return durable[ack_quorum - 1];
}

}  // namespace logfs::client
