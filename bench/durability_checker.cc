#include "bench/durability_checker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "src/util/coding.h"
#include "src/util/crc32c.h"

namespace logfs::bench {
namespace {

constexpr uint32_t kRecordMagic = 0x43484b52;  // "RKHC"
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 4;
constexpr size_t kTrailerBytes = 4;
constexpr uint32_t kMaxPayloadBytes = 1 << 20;

// Each writer session (until its first error) has a file of its own, so
// every file holds one gapless sequence of records.
std::string DataPath(const CheckerOptions& o, int w, int generation) {
  return absl::StrCat(o.dir, "/checker-", w, "-", generation, ".log");
}
std::string AckPath(const CheckerOptions& o, int w) {
  return absl::StrCat(o.log_dir, "/checker-", w, ".acks");
}

// Appends "generation end_offset\n" lines to the acknowledgement log. Plain
// buffered writes flushed per line: the checker process outlives faults
// injected into logfs, so it needs no fsync of its own.
class AckLog {
 public:
  explicit AckLog(const std::string& path) : out_(path, std::ios::app) {}
  bool ok() const { return static_cast<bool>(out_); }
  void Acked(int generation, uint64_t end_offset) {
    out_ << generation << " " << end_offset << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

struct WriterStats {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t errors = 0;
  absl::Duration longest_fsync;
  std::vector<uint32_t> fsync_us;  // of each fdatasync that returned 0
};

// The nearest-rank `p` percentile of `us` (reordered); zero if empty.
absl::Duration Percentile(std::vector<uint32_t>* us, double p) {
  if (us->empty()) return absl::ZeroDuration();
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(us->size())));
  rank = std::clamp<size_t>(rank, 1, us->size()) - 1;
  std::nth_element(us->begin(), us->begin() + static_cast<std::ptrdiff_t>(rank), us->end());
  return absl::Microseconds((*us)[rank]);
}

// One writer: appends records, fdatasyncs, logs acks; after an error it
// continues in a new file (a new generation). Sets *first_file_failed
// before it gives up its first file (the one the size watcher follows).
WriterStats RunWriter(const CheckerOptions& o, int w, absl::Time end,
                      std::atomic<bool>* first_file_failed) {
  WriterStats stats;
  AckLog acks(AckPath(o, w));
  int fd = -1;
  int generation = -1;
  uint64_t seq = 0;
  uint64_t offset = 0;
  uint64_t acked_seq = 0;
  uint64_t acked_offset = 0;
  while (absl::Now() < end) {
    if (fd < 0) {
      ++generation;
      seq = acked_seq = 0;
      offset = acked_offset = 0;
      fd = open(DataPath(o, w, generation).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (fd < 0) {
        ++stats.errors;
        absl::SleepFor(absl::Milliseconds(50));  // back off before the next file
        continue;
      }
    }
    bool failed = false;
    for (int i = 0; i < o.sync_every && !failed; ++i) {
      std::string record = EncodeCheckerRecord(w, seq, o.payload_bytes);
      ssize_t n = write(fd, record.data(), record.size());
      if (n != static_cast<ssize_t>(record.size())) {
        failed = true;
      } else {
        offset += record.size();
        ++seq;
      }
    }
    absl::Time begin = absl::Now();
    if (!failed && fdatasync(fd) == 0) {
      const absl::Duration took = absl::Now() - begin;
      stats.longest_fsync = std::max(stats.longest_fsync, took);
      stats.fsync_us.push_back(
          static_cast<uint32_t>(std::min<int64_t>(absl::ToInt64Microseconds(took), UINT32_MAX)));
      stats.records += seq - acked_seq;
      stats.bytes += offset - acked_offset;
      acked_seq = seq;
      acked_offset = offset;
      acks.Acked(generation, offset);
      continue;
    }
    stats.longest_fsync = std::max(stats.longest_fsync, absl::Now() - begin);
    ++stats.errors;
    if (generation == 0) first_file_failed->store(true);
    close(fd);  // the descriptor is poisoned (DESIGN §3)
    fd = -1;
  }
  if (fd >= 0 && close(fd) != 0) ++stats.errors;
  return stats;
}

}  // namespace

std::string EncodeCheckerRecord(uint32_t writer, uint64_t seq, uint32_t payload_bytes) {
  std::string r(kHeaderBytes + payload_bytes + kTrailerBytes, '\0');
  util::EncodeFixed32(&r[0], kRecordMagic);
  util::EncodeFixed32(&r[4], writer);
  util::EncodeFixed64(&r[8], seq);
  util::EncodeFixed32(&r[16], payload_bytes);
  for (uint32_t i = 0; i < payload_bytes; ++i) {
    r[kHeaderBytes + i] = static_cast<char>((seq * 131 + i * 7 + writer) & 0xff);
  }
  util::EncodeFixed32(&r[kHeaderBytes + payload_bytes],
                      util::Crc32c(r.data(), kHeaderBytes + payload_bytes));
  return r;
}

absl::StatusOr<WriteReport> RunCheckerWriters(const CheckerOptions& o) {
  if (o.dir.empty() || o.log_dir.empty() || o.writers < 1 || o.sync_every < 1 ||
      o.payload_bytes > kMaxPayloadBytes) {
    return absl::InvalidArgumentError("checker: need --dir, --ack_dir and sane sizes");
  }
  for (int w = 0; w < o.writers; ++w) {
    AckLog probe(AckPath(o, w));
    if (!probe.ok()) return absl::FailedPreconditionError("cannot write to " + AckPath(o, w));
  }
  absl::Time end = absl::Now() + o.duration;
  std::vector<WriterStats> stats(o.writers);
  std::atomic<uint64_t> shrinks{0};
  std::vector<std::atomic<bool>> first_file_failed(o.writers);  // all false
  absl::Notification writers_done;
  // The watcher: any file whose size goes down has taken bytes back.
  std::thread watcher([&] {
    std::map<int, off_t> last;
    while (!writers_done.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
      for (int w = 0; w < o.writers; ++w) {
        struct stat st;
        // The watcher follows each writer's first file.
        if (stat(DataPath(o, w, 0).c_str(), &st) != 0) continue;
        // Read after the stat: a writer that got an error sets it before
        // it closes the file, and only then may the file lose the tail
        // that was written but never acked (the writing mount shows every
        // byte whose write() returned; DESIGN §3: the error surfaced at
        // that fsync). The verifier checks every acked byte.
        if (first_file_failed[w].load()) continue;
        if (st.st_size < last[w]) shrinks.fetch_add(1);
        last[w] = std::max(last[w], st.st_size);
      }
    }
  });
  std::vector<std::thread> threads;
  for (int w = 0; w < o.writers; ++w) {
    threads.emplace_back([&, w] { stats[w] = RunWriter(o, w, end, &first_file_failed[w]); });
  }
  for (auto& t : threads) t.join();
  writers_done.Notify();
  watcher.join();
  WriteReport report;
  std::vector<uint32_t> fsync_us;
  for (const auto& s : stats) {
    report.records_acked += s.records;
    report.bytes_acked += s.bytes;
    report.write_errors += s.errors;
    report.longest_fsync = std::max(report.longest_fsync, s.longest_fsync);
    fsync_us.insert(fsync_us.end(), s.fsync_us.begin(), s.fsync_us.end());
  }
  report.fsync_p50 = Percentile(&fsync_us, 0.50);
  report.fsync_p99 = Percentile(&fsync_us, 0.99);
  report.shrinks_seen = shrinks.load();
  report.summary = absl::StrFormat(
      "checker write: writers=%d records_acked=%d bytes_acked=%d write_errors=%d "
      "longest_fsync_ms=%.1f fsync_p50_us=%d fsync_p99_us=%d shrinks_seen=%d\n",
      o.writers, report.records_acked, report.bytes_acked, report.write_errors,
      absl::ToDoubleMilliseconds(report.longest_fsync), absl::ToInt64Microseconds(report.fsync_p50),
      absl::ToInt64Microseconds(report.fsync_p99), report.shrinks_seen);
  return report;
}

namespace {

// The acknowledged end offset of each generation of writer `w`.
std::map<int, uint64_t> AckedEnds(const CheckerOptions& o, int w) {
  std::ifstream in(AckPath(o, w));
  std::map<int, uint64_t> ends;
  int generation = 0;
  uint64_t end = 0;
  while (in >> generation >> end) ends[generation] = std::max(ends[generation], end);
  return ends;
}

// Length of the prefix of `data` made of valid records with sequence
// numbers 0, 1, 2, ... for writer `w`.
uint64_t ValidPrefix(const std::string& data, uint32_t w, uint64_t* records) {
  size_t pos = 0;
  uint64_t expect = 0;
  while (pos + kHeaderBytes + kTrailerBytes <= data.size()) {
    const char* p = data.data() + pos;
    uint32_t payload = util::DecodeFixed32(p + 16);
    if (util::DecodeFixed32(p) != kRecordMagic || payload > kMaxPayloadBytes ||
        pos + kHeaderBytes + payload + kTrailerBytes > data.size()) {
      break;
    }
    uint32_t crc = util::DecodeFixed32(p + kHeaderBytes + payload);
    if (crc != util::Crc32c(p, kHeaderBytes + payload) || util::DecodeFixed32(p + 4) != w ||
        util::DecodeFixed64(p + 8) != expect) {
      break;
    }
    ++expect;
    pos += kHeaderBytes + payload + kTrailerBytes;
  }
  *records = expect;
  return pos;
}

// True if a valid record header (any sequence) starts anywhere after `from`.
bool RecordAfter(const std::string& data, size_t from) {
  char magic[4];
  util::EncodeFixed32(magic, kRecordMagic);
  return data.find(std::string(magic, 4), from + 1) != std::string::npos;
}

// Checks one file against its acknowledged end offset.
void VerifyFile(const std::string& path, uint32_t w, uint64_t acked_end, VerifyReport* report) {
  report->acked_bytes += acked_end;
  std::string data;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    report->acked_bytes_lost += acked_end;
    report->problems.push_back(absl::StrCat(path, ": missing"));
    return;
  }
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) data.append(buf, n);
  int err = errno;
  close(fd);
  if (n < 0) {
    report->acked_bytes_lost += acked_end;
    report->problems.push_back(absl::StrCat(path, ": read failed: ", strerror(err)));
    return;
  }
  uint64_t records = 0;
  uint64_t valid = ValidPrefix(data, w, &records);
  if (valid < acked_end) {
    report->acked_bytes_lost += acked_end - valid;
    report->damaged_records += 1;
    report->problems.push_back(absl::StrCat(path, ": acked through ", acked_end,
                                            " but valid records end at ", valid));
  }
  if (valid < data.size()) {
    report->unacked_tail_bytes += data.size() - std::max<uint64_t>(valid, acked_end);
    if (RecordAfter(data, valid)) {
      report->garbage_then_records += 1;
      report->problems.push_back(
          absl::StrCat(path, ": invalid bytes at ", valid, " are followed by records"));
    }
  }
}

}  // namespace

absl::StatusOr<VerifyReport> VerifyCheckerFiles(const CheckerOptions& o) {
  VerifyReport report;
  for (int w = 0; w < o.writers; ++w) {
    for (const auto& [generation, acked_end] : AckedEnds(o, w)) {
      VerifyFile(DataPath(o, w, generation), static_cast<uint32_t>(w), acked_end, &report);
    }
  }
  report.summary = absl::StrFormat(
      "checker verify: acked_bytes=%d acked_bytes_lost=%d damaged=%d garbage_then_records=%d "
      "unacked_tail_bytes=%d result=%s\n",
      report.acked_bytes, report.acked_bytes_lost, report.damaged_records,
      report.garbage_then_records, report.unacked_tail_bytes, report.ok() ? "OK" : "FAILED");
  return report;
}

}  // namespace logfs::bench
