#include "store/segd/journal.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/crc32c.h"

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

absl::Status ZeroFill(env::WritableFile& file, uint64_t from, uint64_t to) {
  const std::string zeros(kZeroFillBytes, '\0');
  for (uint64_t at = from; at < to;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), to - at));
    RETURN_IF_ERROR(file.WriteAt(at, absl::string_view(zeros.data(), n)));
    at += n;
  }
  return file.Sync();
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

Journal::Journal(JournalOptions options, std::unique_ptr<env::WritableFile> file,
                 std::unique_ptr<env::WritableFile> direct_file)
    : options_(std::move(options)),
      path_(options_.dir + "/" + kJournalFileName),
      file_(std::move(file)),
      direct_file_(std::move(direct_file)) {}

Journal::~Journal() {
  absl::MutexLock lock(&sync_mu_);  // no Sync still uses the files
  // Closed unsynced: a Sync that returned OK made every acked byte durable.
  if (direct_file_ != nullptr) direct_file_->Close().IgnoreError();
  file_->Close().IgnoreError();
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const JournalOptions& options,
                                                       const ReplayFn& replay) {
  env::FileSystem& fs = *options.file_system;
  const std::string path = options.dir + "/" + kJournalFileName;
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> file,
                   fs.NewWritableFile(path, env::WritableFileOptions{/*create=*/true}));
  // The file Sync writes through: O_DIRECT, where the file system takes it
  // (tmpfs does not).
  env::WritableFileOptions direct_options;
  direct_options.direct_io = true;
  std::unique_ptr<env::WritableFile> direct_file;
  if (auto direct = fs.NewWritableFile(path, direct_options); direct.ok()) {
    direct_file = std::move(*direct);
  } else {
    LOG(INFO) << "journal " << path << ": no O_DIRECT (" << direct.status().message()
              << "); writing through the page cache";
  }
  std::unique_ptr<Journal> journal(new Journal(options, std::move(file), std::move(direct_file)));
  // The file's name may be new, or left unsynced by a crash right after an
  // earlier create; without its entry every acked record is gone after a
  // power cut. One directory fsync per open covers both.
  RETURN_IF_ERROR(fs.SyncDir(options.dir));
  ASSIGN_OR_RETURN(uint64_t size, journal->file_->Size());
  RETURN_IF_ERROR(journal->Replay(replay));
  if (options.preallocate && size < options.journal_bytes) {
    RETURN_IF_ERROR(ZeroFill(*journal->file_, size, options.journal_bytes));
    size = options.journal_bytes;
  }
  // Replay and zero-fill read and wrote through the page cache; Sync does
  // not use those pages again.
  journal->file_->DropCache();
  absl::MutexLock lock(&journal->mu_);
  journal->file_bytes_ = size;
  return journal;
}

absl::Status Journal::Replay(const ReplayFn& replay) {
  ASSIGN_OR_RETURN(const uint64_t file_bytes, file_->Size());
  uint64_t at = 0;
  uint64_t generation = 0;
  uint64_t replayed = 0;
  for (;;) {
    char raw[kJournalHeaderBytes];
    ASSIGN_OR_RETURN(size_t n, file_->ReadAt(at, sizeof(raw), raw));
    Header h;
    if (n < sizeof(raw) || !DecodeHeader(raw, &h)) break;
    if (generation != 0 && h.generation != generation) break;
    // A length past the file's end (a damaged header whose CRC still
    // matches) is never allocated: no whole record follows.
    if (h.length > file_bytes - at - kJournalHeaderBytes) break;
    ASSIGN_OR_RETURN(std::string body, env::ReadUpTo(*file_, at + kJournalHeaderBytes, h.length));
    if (body.size() != h.length || util::Crc32c(body.data(), body.size()) != h.data_crc) {
      break;  // torn: written after the last fdatasync, never acknowledged
    }
    generation = h.generation;
    RETURN_IF_ERROR(replay(JournalRecord{h.segment_id, h.offset, body}));
    ++replayed;
    at += kJournalHeaderBytes + h.length;
  }
  if (replayed > 0) LOG(INFO) << "journal " << path_ << ": replayed " << replayed << " records";
  return absl::OkStatus();
}

absl::Status Journal::Restart() {
  absl::MutexLock sync_lock(&sync_mu_);
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  char zeros[kJournalHeaderBytes] = {};
  absl::Status s = file_->WriteAt(0, absl::string_view(zeros, sizeof(zeros)));
  if (s.ok()) s = file_->Sync();
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
    LOG(ERROR) << failure_ << "; every later append on this server fails until it restarts";
  }
  return failure_;
}

absl::Status Journal::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status Journal::GrowLocked(uint64_t end) {
  absl::Status grown = file_->Allocate(file_bytes_, end - file_bytes_);
  int error = AttachedErrno(grown);
  if (error == EOPNOTSUPP || error == ENOSYS) {
    // No fallocate here: allocate by writing zeros instead.
    grown = ZeroFill(*file_, file_bytes_, end);
    error = AttachedErrno(grown);
  }
  if (error == ENOSPC || absl::IsResourceExhausted(grown)) {
    return absl::ResourceExhaustedError(absl::StrCat("journal ", path_, ": no space left"));
  }
  if (!grown.ok()) return FailLocked(grown);
  file_bytes_ = end;
  return absl::OkStatus();
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
    RETURN_IF_ERROR(
        GrowLocked((position_ + record_bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes));
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

absl::Status Journal::WriteOut(absl::string_view bytes, uint64_t at, bool* durable) {
  if (direct_file_ != nullptr) {
    // Direct writes carry RWF_DSYNC: the block layer sends the cache flush
    // when the write completes (FUA where the disk has it), with no second
    // syscall and no wake-up of this thread in between.
    absl::Status written = direct_file_->WriteAtDurably(at, bytes);
    const int error = AttachedErrno(written);
    if (written.ok() || (error != EINVAL && error != EOPNOTSUPP)) {
      *durable = written.ok();
      return written;
    }
    // Opened with O_DIRECT but refused at write time (some file systems
    // do): the page cache it is, from now on. Nothing was written.
    LOG(WARNING) << "journal " << path_ << ": O_DIRECT write refused (" << written.message()
                 << "); writing through the page cache";
    direct_file_->Close().IgnoreError();  // only ever written with RWF_DSYNC
    direct_file_.reset();
  }
  *durable = false;
  return file_->WriteAt(at, bytes);
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
  absl::Status status;
  bool durable = false;
  if (writing_.size() > 0) {
    const size_t bytes = writing_.PadToBlock();
    status = WriteOut(absl::string_view(writing_.data(), bytes), at, &durable);
  }
  if (status.ok() && !durable) status = file_->Sync();
  writing_.clear();
  writing_.ShrinkTo(kKeepBufferBytes);
  syncs_.fetch_add(1);
  if (status.ok()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return FailLocked(status);
}

}  // namespace logfs::segd
