#include "store/segd/journal.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/posix_error.h"
#include "src/status/syscall_error.h"
#include "src/util/crc32c.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {
namespace {

constexpr uint32_t kRecordMagic = 0x314a474c;  // "LGJ1" little-endian
constexpr size_t kZeroFillBytes = 1u << 20;
// A staging buffer larger than this is freed after the round that used it.
constexpr size_t kKeepBufferBytes = 8u << 20;

// Header fields, little-endian, at these offsets. The header CRC covers
// bytes 8..40.
struct Header {
  uint64_t generation = 0;
  uint64_t segment_id = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t data_crc = 0;
};

template <typename T>
void Put(char* at, T value) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "journal is little-endian");
  std::memcpy(at, &value, sizeof(value));
}

template <typename T>
T Get(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(value));
  return value;
}

void EncodeHeader(const Header& h, char out[kJournalHeaderBytes]) {
  Put<uint32_t>(out, kRecordMagic);
  Put<uint64_t>(out + 8, h.generation);
  Put<uint64_t>(out + 16, h.segment_id);
  Put<uint64_t>(out + 24, h.offset);
  Put<uint32_t>(out + 32, h.length);
  Put<uint32_t>(out + 36, h.data_crc);
  Put<uint32_t>(out + 4, util::Crc32c(out + 8, kJournalHeaderBytes - 8));
}

// False if `in` is not a whole, valid header (zeroes, a torn write, garbage).
bool DecodeHeader(const char* in, Header* h) {
  if (Get<uint32_t>(in) != kRecordMagic) return false;
  if (Get<uint32_t>(in + 4) != util::Crc32c(in + 8, kJournalHeaderBytes - 8)) return false;
  h->generation = Get<uint64_t>(in + 8);
  h->segment_id = Get<uint64_t>(in + 16);
  h->offset = Get<uint64_t>(in + 24);
  h->length = Get<uint32_t>(in + 32);
  h->data_crc = Get<uint32_t>(in + 36);
  return true;
}

uint64_t NewGeneration() {
  // Random, not counted: a generation must never repeat one whose stale
  // records may still sit further into the file, even across restarts.
  std::random_device device;
  std::mt19937_64 rng((uint64_t{device()} << 32) ^ device());
  uint64_t g = 0;
  while (g == 0) g = rng();
  return g;
}

absl::Status ZeroFill(int fd, uint64_t from, uint64_t to) {
  std::string zeros(kZeroFillBytes, '\0');
  for (uint64_t at = from; at < to;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), to - at));
    absl::Status s = env::PwriteAll(fd, absl::string_view(zeros.data(), n), at);
    if (!s.ok()) return s;
    at += n;
  }
  if (::fdatasync(fd) != 0) return SyscallError(errno, "fdatasync journal");
  return absl::OkStatus();
}

}  // namespace

void Journal::BlockBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  size_t capacity = std::max<size_t>(capacity_ * 2, 64 * kBlockBytes);
  while (capacity < bytes) capacity *= 2;
  void* data = std::aligned_alloc(kBlockBytes, capacity);
  CHECK(data != nullptr) << "out of memory for " << capacity << " journal bytes";
  if (size_ > 0) std::memcpy(data, data_, size_);
  std::free(data_);
  data_ = static_cast<char*>(data);
  capacity_ = capacity;
}

void Journal::BlockBuffer::Append(const char* bytes, size_t n) {
  Reserve(size_ + n + kBlockBytes);  // room to pad later without moving
  std::memcpy(data_ + size_, bytes, n);
  size_ += n;
}

void Journal::BlockBuffer::ShrinkTo(size_t keep) {
  if (capacity_ <= keep || size_ > 0) return;
  std::free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

size_t Journal::BlockBuffer::PadToBlock() {
  size_t padded = (size_ + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
  Reserve(padded);
  std::memset(data_ + size_, 0, padded - size_);
  return padded;
}

Journal::Journal(JournalOptions options, int fd, int direct_fd)
    : options_(std::move(options)),
      path_(options_.dir + "/" + kJournalFileName),
      fd_(fd),
      direct_fd_(direct_fd) {}

Journal::~Journal() {
  absl::MutexLock lock(&sync_mu_);  // no Sync still uses the descriptors
  if (direct_fd_ >= 0) ::close(direct_fd_);
  ::close(fd_);
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const JournalOptions& options,
                                                       const ReplayFn& replay) {
  const std::string path = options.dir + "/" + kJournalFileName;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  // The descriptor Sync writes through: O_DIRECT, where the file system
  // takes it (tmpfs does not).
  int direct_fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct_fd < 0) {
    LOG(INFO) << "journal " << path << ": no O_DIRECT (" << std::strerror(errno)
              << "); writing through the page cache";
  }
  std::unique_ptr<Journal> journal(new Journal(options, fd, direct_fd));
  // The file's name may be new, or left unsynced by a crash right after an
  // earlier create; without its entry every acked record is gone after a
  // power cut. One directory fsync per open covers both.
  if (absl::Status synced = env::SyncDir(options.dir); !synced.ok()) return synced;
  struct stat st;
  if (::fstat(fd, &st) != 0) return SyscallError(errno, absl::StrCat("fstat ", path));
  uint64_t size = static_cast<uint64_t>(st.st_size);

  // Replay: whole records of the first record's generation, in order.
  uint64_t at = 0;
  uint64_t generation = 0;
  uint64_t replayed = 0;
  std::string data;
  for (;;) {
    char raw[kJournalHeaderBytes];
    ssize_t n = ::pread(fd, raw, sizeof(raw), static_cast<off_t>(at));
    if (n < 0) return SyscallError(errno, absl::StrCat("read ", path));
    Header h;
    if (static_cast<size_t>(n) < sizeof(raw) || !DecodeHeader(raw, &h)) break;
    if (generation != 0 && h.generation != generation) break;
    auto body = env::PreadUpTo(fd, at + kJournalHeaderBytes, h.length);
    if (!body.ok()) return body.status();
    if (body->size() != h.length || util::Crc32c(body->data(), body->size()) != h.data_crc) {
      break;  // torn: written after the last fdatasync, never acknowledged
    }
    generation = h.generation;
    absl::Status s = replay(JournalRecord{h.segment_id, h.offset, *body});
    if (!s.ok()) return s;
    ++replayed;
    at += kJournalHeaderBytes + h.length;
  }
  if (replayed > 0) LOG(INFO) << "journal " << path << ": replayed " << replayed << " records";

  if (options.preallocate && size < options.journal_bytes) {
    absl::Status s = ZeroFill(fd, size, options.journal_bytes);
    if (!s.ok()) return s;
    size = options.journal_bytes;
  }
  // Replay and zero-fill read and wrote through the page cache; Sync does
  // not use those pages again.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  absl::MutexLock lock(&journal->mu_);
  journal->file_bytes_ = size;
  return journal;
}

absl::Status Journal::Restart() {
  absl::MutexLock sync_lock(&sync_mu_);
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  char zeros[kJournalHeaderBytes] = {};
  absl::Status s = env::PwriteAll(fd_, absl::string_view(zeros, sizeof(zeros)), 0);
  if (s.ok() && ::fdatasync(fd_) != 0) s = SyscallError(errno, "fdatasync journal");
  syncs_.fetch_add(1);
  if (!s.ok()) return FailLocked(s);
  file_bytes_ = std::max<uint64_t>(file_bytes_, sizeof(zeros));
  generation_ = NewGeneration();
  position_ = 0;
  staged_start_ = 0;
  staged_.clear();
  return absl::OkStatus();
}

absl::Status Journal::FailLocked(absl::Status status) {
  if (failure_.ok()) {
    failure_ = absl::DataLossError(absl::StrCat("journal ", path_, " failed: ", status.message()));
    LOG(ERROR) << failure_;
  }
  return failure_;
}

absl::Status Journal::Add(uint64_t segment_id, uint64_t offset, absl::string_view data) {
  const uint64_t record_bytes = kJournalHeaderBytes + data.size();
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  if (generation_ == 0) return absl::FailedPreconditionError("journal: Add before Restart");
  if (position_ > 0 && position_ + record_bytes > options_.journal_bytes) {
    // Wrap: the records about to be overwritten must be in the replicas,
    // and so must the staged ones, which are dropped unwritten.
    if (checkpoint_) {
      absl::Status s = checkpoint_();
      if (!s.ok()) return FailLocked(s);
    }
    generation_ = NewGeneration();
    position_ = 0;
    staged_start_ = 0;
    staged_.clear();
    wraps_.fetch_add(1);
  }
  if (position_ + record_bytes > file_bytes_) {
    // A journal that was not preallocated grows: reserve the blocks now, so
    // a full disk fails this append and not a later Sync of many.
    const uint64_t end = (position_ + record_bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
    int error = ::fallocate(fd_, 0, static_cast<off_t>(file_bytes_),
                            static_cast<off_t>(end - file_bytes_)) == 0
                    ? 0
                    : errno;
    if (error == EOPNOTSUPP || error == ENOSYS) {
      // No fallocate here: allocate by writing zeros instead.
      absl::Status zeroed = ZeroFill(fd_, file_bytes_, end);
      error = zeroed.ok() ? 0 : ErrnoFromStatus(zeroed);
      if (!zeroed.ok() && error != ENOSPC) return FailLocked(zeroed);
    }
    if (error == ENOSPC) {
      return absl::ResourceExhaustedError(absl::StrCat("journal ", path_, ": no space left"));
    }
    if (error != 0) return FailLocked(SyscallError(error, "reserve journal blocks"));
    file_bytes_ = end;
  }
  char header[kJournalHeaderBytes];
  EncodeHeader(Header{generation_, segment_id, offset, static_cast<uint32_t>(data.size()),
                      util::Crc32c(data.data(), data.size())},
               header);
  staged_.Append(header, sizeof(header));
  staged_.Append(data.data(), data.size());
  position_ += record_bytes;
  return absl::OkStatus();
}

int Journal::WriteOut(char* buffer, size_t bytes, uint64_t at, bool* durable) {
  *durable = direct_fd_ >= 0;
  for (size_t done = 0; done < bytes;) {
    const bool direct = direct_fd_ >= 0;
    struct iovec iov = {buffer + done, bytes - done};
    // Direct writes carry RWF_DSYNC: the block layer sends the cache flush
    // when the write completes (FUA where the disk has it), with no second
    // syscall and no wake-up of this thread in between.
    ssize_t n = direct ? ::pwritev2(direct_fd_, &iov, 1, static_cast<off_t>(at + done), RWF_DSYNC)
                       : ::pwrite(fd_, iov.iov_base, iov.iov_len, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EINVAL || errno == EOPNOTSUPP) && direct) {
      // Opened with O_DIRECT but refused at write time (some file systems
      // do): the page cache it is, from now on.
      LOG(WARNING) << "journal " << path_ << ": O_DIRECT write refused ("
                   << std::strerror(errno) << "); writing through the page cache";
      ::close(direct_fd_);
      direct_fd_ = -1;
      *durable = false;
      continue;
    }
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

absl::Status Journal::Sync() {
  absl::MutexLock sync_lock(&sync_mu_);
  uint64_t at;
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    // Take the staged records; the next Sync rewrites their partial last
    // block, so the new staging buffer starts with a copy of it.
    at = staged_start_;
    writing_.clear();
    writing_.swap(staged_);
    const size_t whole = writing_.size() / kBlockBytes * kBlockBytes;
    if (writing_.size() > whole) {
      staged_.Append(writing_.data() + whole, writing_.size() - whole);
    }
    staged_start_ = at + whole;
  }
  int error = 0;
  bool durable = false;
  if (writing_.size() > 0) {
    const size_t bytes = writing_.PadToBlock();
    error = WriteOut(writing_.data(), bytes, at, &durable);
  }
  if (error == 0 && !durable && ::fdatasync(fd_) != 0) error = errno;
  writing_.clear();
  writing_.ShrinkTo(kKeepBufferBytes);
  syncs_.fetch_add(1);
  if (error == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return FailLocked(SyscallError(error, "write or fdatasync journal"));
}

}  // namespace logfs::segd
