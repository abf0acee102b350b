#include "store/meta/db/metadata_db.h"

#include <glog/logging.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/write_batch_with_index.h>
#include <rocksdb/write_batch.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/util/coding.h"
#include "store/format/error_codec.h"
#include "store/format/limits.h"

namespace logfs::meta {
namespace {

// One-byte key prefixes (docs/metadata_format.md).
constexpr char kInodePrefix = 'i';
constexpr char kDirEntryPrefix = 'd';
constexpr char kCounterPrefix = 'c';
constexpr char kServerPrefix = 's';
constexpr char kPendingDeletionPrefix = 'p';
constexpr char kOrphanPrefix = 'o';
constexpr char kCallRecordPrefix = 'r';
constexpr char kSharedSegmentPrefix = 'g';
constexpr char kSnapshotPrefix = 'n';
// A rocksdb::WriteBatch's contents start with an 8-byte sequence and a
// 4-byte count (rocksdb/write_batch.h, WriteBatchInternal).
constexpr size_t kWriteBatchHeaderBytes = 12;
// Expired call records deleted per batch (about 30 KiB of journal record).
constexpr int kCallRecordDeletesPerBatch = 1000;

std::string U64Key(char prefix, uint64_t id) {
  std::string key(9, '\0');
  key[0] = prefix;
  util::EncodeBigEndian64(&key[1], id);
  return key;
}

std::string InodeKey(uint64_t ino) { return U64Key(kInodePrefix, ino); }
std::string DirPrefix(uint64_t parent) { return U64Key(kDirEntryPrefix, parent); }
std::string DirEntryKey(uint64_t parent, const std::string& name) {
  return DirPrefix(parent) + name;
}
std::string CounterKey(MetaCounter counter) {
  return std::string{kCounterPrefix, static_cast<char>(counter)};
}
std::string ServerKey(uint64_t server_id) { return U64Key(kServerPrefix, server_id); }
std::string PendingPrefix(uint64_t server_id) { return U64Key(kPendingDeletionPrefix, server_id); }
std::string PendingKey(uint64_t server_id, uint64_t segment_id) {
  std::string key = PendingPrefix(server_id);
  key.resize(17);
  util::EncodeBigEndian64(&key[9], segment_id);
  return key;
}
std::string OrphanKey(uint64_t ino) { return U64Key(kOrphanPrefix, ino); }
std::string SharedSegmentKey(uint64_t segment_id) {
  return U64Key(kSharedSegmentPrefix, segment_id);
}
std::string SnapshotKey(uint64_t root) { return U64Key(kSnapshotPrefix, root); }
std::string CallRecordKey(uint64_t mount_id, uint64_t seq) {
  std::string key = U64Key(kCallRecordPrefix, mount_id);
  key.resize(17);
  util::EncodeBigEndian64(&key[9], seq);
  return key;
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return absl::UnavailableError(message);
  return absl::InternalError(message);
}

template <typename Message>
absl::StatusOr<Message> Parse(const std::string& value, absl::string_view what) {
  Message message;
  if (!message.ParseFromString(value)) {
    return absl::DataLossError(absl::StrCat("unparseable ", what, " in metadata db"));
  }
  return message;
}

}  // namespace

struct MetadataDb::Batch::Rep {
  rocksdb::WriteBatch batch;
  ChangedKeys keys;  // the inodes and entries of `batch`
};

struct MetadataDb::Rep {
  std::string path;
  std::unique_ptr<rocksdb::DB> db;
};

// Staged changes over RocksDB: one entry per key (overwrite_key), in key
// order, so that reads find a key's latest value and scans merge it into
// RocksDB's own order (NewIteratorWithBase).
struct MetadataDb::Layer {
  rocksdb::WriteBatchWithIndex index{rocksdb::BytewiseComparator(), 0, /*overwrite_key=*/true};
};

namespace {

// Copies the operations of a Batch into a Layer.
class LayerWriter : public rocksdb::WriteBatch::Handler {
 public:
  explicit LayerWriter(rocksdb::WriteBatchWithIndex* index) : index_(index) {}
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    if (cf != 0) return rocksdb::Status::InvalidArgument("column family");
    return index_->Put(key, value);
  }
  rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
    if (cf != 0) return rocksdb::Status::InvalidArgument("column family");
    return index_->Delete(key);
  }

 private:
  rocksdb::WriteBatchWithIndex* const index_;
};

enum class LayerHit { kAbsent, kPut, kDeleted };

// What `layer` holds for `key` (the value into *value when put).
LayerHit FindInLayer(rocksdb::WriteBatchWithIndex& index, const std::string& key,
                     std::string* value) {
  std::unique_ptr<rocksdb::WBWIIterator> it(index.NewIterator());
  LayerHit hit = LayerHit::kAbsent;
  for (it->Seek(key); it->Valid(); it->Next()) {
    const rocksdb::WriteEntry entry = it->Entry();
    if (entry.key != rocksdb::Slice(key)) break;
    if (entry.type == rocksdb::kPutRecord) {
      hit = LayerHit::kPut;
      value->assign(entry.value.data(), entry.value.size());
    } else if (entry.type == rocksdb::kDeleteRecord || entry.type == rocksdb::kSingleDeleteRecord) {
      hit = LayerHit::kDeleted;
    }
  }
  return hit;
}

std::string EncodeSeq(uint64_t seq) {
  std::string value(8, '\0');
  util::EncodeBigEndian64(value.data(), seq);
  return value;
}

}  // namespace

absl::StatusOr<std::string> MetadataDb::ReadKey(const std::string& key, absl::string_view what,
                                                View view, const Snapshot* at) {
  if (view == View::kLatest) {
    std::string value;
    absl::MutexLock lock(&write_mu_);
    for (Layer* layer : {staged_.get(), committing_.get()}) {
      if (layer == nullptr) continue;
      switch (FindInLayer(layer->index, key, &value)) {
        case LayerHit::kPut:
          return value;
        case LayerHit::kDeleted:
          return absl::NotFoundError(absl::StrCat(what, " not found"));
        case LayerHit::kAbsent:
          break;
      }
    }
  }
  // Not staged: RocksDB has the latest value. A group the leader writes
  // meanwhile holds only what its layer (just looked at) held.
  std::string value;
  rocksdb::ReadOptions read_options;
  read_options.snapshot =
      at != nullptr ? static_cast<const rocksdb::Snapshot*>(at->snapshot_) : nullptr;
  rocksdb::Status s = rep_->db->Get(read_options, key, &value);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat(what, " not found"));
  if (!s.ok()) return FromRocks(s, what);
  return value;
}

template <typename Fn>
absl::Status MetadataDb::ScanKeys(const std::string& prefix, const std::string& start, View view,
                                  Fn fn, const Snapshot* at) {
  auto scan = [&](rocksdb::Iterator* it) {
    for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (!fn(it->key().ToString(), it->value().ToString())) break;
    }
    return FromRocks(it->status(), "scan");
  };
  rocksdb::ReadOptions read_options;
  read_options.snapshot =
      at != nullptr ? static_cast<const rocksdb::Snapshot*>(at->snapshot_) : nullptr;
  if (view == View::kDurable) {
    std::unique_ptr<rocksdb::Iterator> it(rep_->db->NewIterator(read_options));
    return scan(it.get());
  }
  // RocksDB's iterator is made under the lock, with the layers: a group
  // the leader wrote is either in the iterator's view or still in
  // committing_ (dropped under the lock, after its write), never in
  // neither.
  absl::MutexLock lock(&write_mu_);
  std::unique_ptr<rocksdb::Iterator> it(rep_->db->NewIterator(read_options));
  if (committing_ != nullptr) it.reset(committing_->index.NewIteratorWithBase(it.release()));
  it.reset(staged_->index.NewIteratorWithBase(it.release()));
  return scan(it.get());
}

MetadataDb::Batch::Batch() : rep_(std::make_unique<Rep>()) {}
MetadataDb::Batch::~Batch() = default;

void MetadataDb::Batch::PutInode(const proto::Inode& inode) {
  rep_->batch.Put(InodeKey(inode.attr().ino()), inode.SerializeAsString()).PermitUncheckedError();
  rep_->keys.inodes.push_back(inode.attr().ino());
}
void MetadataDb::Batch::DeleteInode(uint64_t ino) {
  rep_->batch.Delete(InodeKey(ino)).PermitUncheckedError();
  rep_->keys.inodes.push_back(ino);
}
void MetadataDb::Batch::PutDirEntry(uint64_t parent, const proto::DirEntry& entry) {
  rep_->batch.Put(DirEntryKey(parent, entry.name()), entry.SerializeAsString())
      .PermitUncheckedError();
  rep_->keys.entries.emplace_back(parent, entry.name());
}
void MetadataDb::Batch::DeleteDirEntry(uint64_t parent, const std::string& name) {
  rep_->batch.Delete(DirEntryKey(parent, name)).PermitUncheckedError();
  rep_->keys.entries.emplace_back(parent, name);
}
void MetadataDb::Batch::set_origin(const proto::CallId& call) {
  rep_->keys.origin_mount = call.mount_id();
  rep_->keys.origin_call = call.seq();
}
void MetadataDb::Batch::PutCounter(MetaCounter counter, uint64_t value) {
  char buf[8];
  util::EncodeBigEndian64(buf, value);
  rep_->batch.Put(CounterKey(counter), rocksdb::Slice(buf, 8)).PermitUncheckedError();
}
void MetadataDb::Batch::PutServer(const proto::RegisterServerRequest& server) {
  rep_->batch.Put(ServerKey(server.server_id()), server.SerializeAsString()).PermitUncheckedError();
}
void MetadataDb::Batch::AddPendingDeletion(uint64_t server_id, uint64_t segment_id) {
  rep_->batch.Put(PendingKey(server_id, segment_id), "").PermitUncheckedError();
}
void MetadataDb::Batch::DeletePendingDeletion(uint64_t server_id, uint64_t segment_id) {
  rep_->batch.Delete(PendingKey(server_id, segment_id)).PermitUncheckedError();
}
void MetadataDb::Batch::AddOrphan(uint64_t ino) {
  rep_->batch.Put(OrphanKey(ino), "").PermitUncheckedError();
}
void MetadataDb::Batch::DeleteOrphan(uint64_t ino) {
  rep_->batch.Delete(OrphanKey(ino)).PermitUncheckedError();
}
void MetadataDb::Batch::PutSnapshot(const proto::SnapshotRecord& record) {
  rep_->batch.Put(SnapshotKey(record.root()), record.SerializeAsString()).PermitUncheckedError();
}
void MetadataDb::Batch::DeleteSnapshot(uint64_t root) {
  rep_->batch.Delete(SnapshotKey(root)).PermitUncheckedError();
}
void MetadataDb::Batch::PutCallRecord(const proto::CallId& call, const proto::CallRecord& record) {
  rep_->batch.Put(CallRecordKey(call.mount_id(), call.seq()), record.SerializeAsString())
      .PermitUncheckedError();
}
void MetadataDb::Batch::DeleteCallRecord(uint64_t mount_id, uint64_t seq) {
  rep_->batch.Delete(CallRecordKey(mount_id, seq)).PermitUncheckedError();
}
void MetadataDb::Batch::PutSharedSegment(uint64_t segment_id, const proto::SharedSegment& shared) {
  rep_->batch.Put(SharedSegmentKey(segment_id), shared.SerializeAsString()).PermitUncheckedError();
}
void MetadataDb::Batch::DeleteSharedSegment(uint64_t segment_id) {
  rep_->batch.Delete(SharedSegmentKey(segment_id)).PermitUncheckedError();
}
int MetadataDb::Batch::count() const { return rep_->batch.Count(); }

absl::StatusOr<std::unique_ptr<MetadataDb>> MetadataDb::Open(const MetadataDbOptions& options) {
  if (absl::Status made = env::MakeDirs(*options.file_system, options.path); !made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create metadata db directory: ", made.message()));
  }
  rocksdb::Options rocks_options;
  rocks_options.create_if_missing = true;
  rocks_options.paranoid_checks = true;
  rocks_options.keep_log_file_num = 4;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(rocks_options, options.path, &db);
  if (!s.ok()) {
    std::string reason = s.ToString();
    if (s.IsIOError() && (absl::StrContains(reason, "lock") || absl::StrContains(reason, "LOCK"))) {
      return absl::FailedPreconditionError(
          absl::StrCat("metadata db ", options.path,
                       " is locked by another process (is another logfs meta running on this "
                       "data dir?): ",
                       reason));
    }
    if (s.IsCorruption()) return FromRocks(s, absl::StrCat("open ", options.path));
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open metadata db ", options.path, ": ", reason));
  }
  auto rep = std::make_unique<Rep>();
  rep->path = options.path;
  rep->db.reset(db);
  // MakeDirs synced the entry if it created the directory; this covers one
  // left unsynced by a crash right after a create, or by a logfs before
  // this fix, which lost the whole database at a power cut (issue 11).
  if (absl::Status synced = options.file_system->SyncDir(env::Dirname(options.path));
      !synced.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot sync the metadata db's parent directory: ", synced.message()));
  }
  auto opened = std::unique_ptr<MetadataDb>(new MetadataDb(std::move(rep)));
  ASSIGN_OR_RETURN(uint64_t applied, opened->GetCounter(MetaCounter::kAppliedSeq));
  {
    absl::MutexLock lock(&opened->write_mu_);
    opened->applied_seq_ = applied;
    opened->staged_seq_ = applied;
    opened->staged_ = std::make_shared<Layer>();
  }
  return opened;
}

MetadataDb::MetadataDb(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

MetadataDb::~MetadataDb() {
  if (rep_->db != nullptr) rep_->db->Close().PermitUncheckedError();  // best effort at exit
}

MetadataDb::Snapshot::~Snapshot() {
  db_->rep_->db->ReleaseSnapshot(static_cast<const rocksdb::Snapshot*>(snapshot_));
}

std::unique_ptr<MetadataDb::Snapshot> MetadataDb::DurableSnapshot() {
  return std::unique_ptr<Snapshot>(new Snapshot(this, rep_->db->GetSnapshot()));
}

absl::StatusOr<uint64_t> MetadataDb::Stage(Batch& batch) {
  absl::MutexLock lock(&write_mu_);
  if (!journal_failure_.ok()) return journal_failure_;
  const rocksdb::WriteBatch& ops = batch.rep_->batch;
  const bool journaled = journal_ != &local_journal_;
  if (journaled && ops.Data().size() > journal_->RecordBytesMax()) {
    return absl::InvalidArgumentError(absl::StrCat("a namespace change of ", ops.Data().size(),
                                                   " bytes is over the journal's limit of ",
                                                   journal_->RecordBytesMax()));
  }
  const uint64_t seq = staged_seq_ + 1;
  LayerWriter writer(&staged_->index);
  rocksdb::Status copied = ops.Iterate(&writer);
  // Only Put and Delete are ever batched; anything else is a bug here.
  CHECK(copied.ok()) << "staging a metadata batch: " << copied.ToString();
  CHECK(staged_->index.Put(CounterKey(MetaCounter::kAppliedSeq), EncodeSeq(seq)).ok());
  if (journaled) staged_records_.push_back(ops.Data());
  const ChangedKeys& keys = batch.rep_->keys;
  if (durable_observer_ && (!keys.inodes.empty() || !keys.entries.empty())) {
    staged_keys_.push_back(keys);
  }
  staged_seq_ = seq;
  return seq;
}

uint64_t MetadataDb::staged_seq() const {
  absl::MutexLock lock(&write_mu_);
  return staged_seq_;
}

void MetadataDb::SetDurableObserver(DurableObserver observer) {
  absl::MutexLock lock(&write_mu_);
  durable_observer_ = std::move(observer);
}

absl::Status MetadataDb::WaitDurable(uint64_t seq) {
  absl::MutexLock lock(&write_mu_);
  // absl::Mutex evaluates each waiter's condition when the lock is
  // released, so a group's end wakes only the waiters it made durable and
  // one to lead the next group, not every waiter.
  auto settled = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
    return applied_seq_ >= seq || !journal_failure_.ok() || committing_ == nullptr;
  };
  while (applied_seq_ < seq) {
    if (!journal_failure_.ok()) return journal_failure_;
    if (committing_ == nullptr) {
      CommitGroupLocked();
    } else {
      write_mu_.Await(absl::Condition(&settled));
    }
  }
  return absl::OkStatus();
}

absl::Status MetadataDb::Write(Batch& batch) {
  ASSIGN_OR_RETURN(uint64_t seq, Stage(batch));
  return WaitDurable(seq);
}

void MetadataDb::CommitGroupLocked() {
  const uint64_t first = applied_seq_ + 1;
  const uint64_t last = staged_seq_;
  committing_ = std::exchange(staged_, std::make_shared<Layer>());
  std::vector<std::string> records = std::exchange(staged_records_, {});
  std::vector<ChangedKeys> keys = std::exchange(staged_keys_, {});
  DurableObserver observer = durable_observer_;
  MetaJournal* const journal = journal_;
  const bool journaled = journal != &local_journal_;
  std::shared_ptr<const Layer> group = committing_;
  write_mu_.Unlock();
  // Journal first: a replica's RocksDB never holds a record the journal
  // may lack. The layer's batch holds every change of the group in order,
  // each with its kAppliedSeq, so the last one's stays.
  absl::Status appended = journaled ? journal->Append(first, records) : absl::OkStatus();
  absl::Status applied = appended;
  if (appended.ok()) {
    rocksdb::WriteBatch ops(*const_cast<Layer&>(*group).index.GetWriteBatch());
    rocksdb::WriteOptions write_options;
    write_options.sync = true;
    applied = FromRocks(rep_->db->Write(write_options, &ops), "metadata write");
  }
  // Durable and readable, and no waiter of the group has returned yet.
  if (applied.ok() && observer && !keys.empty()) observer(std::move(keys));
  write_mu_.Lock();
  if (applied.ok()) {
    applied_seq_ = last;
    ++stats_.groups;
    stats_.changes += last - first + 1;
  } else {
    // Every change staged since was decided on top of this group: none of
    // them can be written now, whatever the journal holds.
    LOG(ERROR) << "metadata group of changes " << first << " to " << last << " failed"
               << (appended.ok() ? " in RocksDB" : " in the journal") << ": " << applied;
    FailJournalLocked(applied);
  }
  committing_.reset();
}

void MetadataDb::FailJournalLocked(const absl::Status& why) {
  if (journal_ != &local_journal_) {
    journal_failure_ = format::NotActiveMetaError(
        absl::StrCat("meta stopped writing after a journal failure: ", why.message()), "");
  } else {
    // A lone meta: clients get RocksDB's own error (ENOSPC for a full
    // disk). The changes staged are lost with the process, as none was
    // acknowledged; a restart writes again.
    journal_failure_ =
        absl::Status(why.ok() ? absl::StatusCode::kInternal : why.code(),
                     absl::StrCat("meta stopped writing after a failed metadata write (restart "
                                  "it once the cause is fixed): ",
                                  why.message()));
  }
  LOG(ERROR) << "metadata writes stop: journal record " << applied_seq_ + 1 << ": " << why;
  if (on_journal_failure_) {
    auto handler = std::move(on_journal_failure_);
    on_journal_failure_ = nullptr;
    handler(why);
  }
}

void MetadataDb::SetJournal(MetaJournal* journal) {
  absl::MutexLock lock(&write_mu_);
  CHECK_EQ(staged_seq_, applied_seq_) << "a journal set with changes staged";
  journal_ = journal != nullptr ? journal : &local_journal_;
}

void MetadataDb::SetJournalFailureHandler(std::function<void(const absl::Status&)> handler) {
  absl::MutexLock lock(&write_mu_);
  on_journal_failure_ = std::move(handler);
}

absl::Status MetadataDb::ApplyJournalRecord(const proto::MetaJournalRecord& record) {
  absl::MutexLock lock(&write_mu_);
  if (record.seq() <= applied_seq_) return absl::OkStatus();
  if (staged_seq_ != applied_seq_) {
    return absl::FailedPreconditionError(
        "journal records are applied only by a replica that "
        "stages no change of its own");
  }
  if (record.seq() != applied_seq_ + 1) {
    return absl::FailedPreconditionError(absl::StrCat("journal record ", record.seq(), " follows ",
                                                      applied_seq_,
                                                      ": records in between are missing"));
  }
  if (record.batch().size() < kWriteBatchHeaderBytes) {
    return absl::DataLossError(absl::StrCat("journal record ", record.seq(), " is no batch"));
  }
  rocksdb::WriteBatch batch(record.batch());
  char buf[8];
  util::EncodeBigEndian64(buf, record.seq());
  if (!batch.Put(CounterKey(MetaCounter::kAppliedSeq), rocksdb::Slice(buf, 8)).ok()) {
    return absl::DataLossError(absl::StrCat("journal record ", record.seq(), " is no batch"));
  }
  absl::Status applied = FromRocks(rep_->db->Write(rocksdb::WriteOptions(), &batch),
                                   absl::StrCat("apply journal record ", record.seq()));
  if (!applied.ok()) {
    if (absl::IsInternal(applied)) return absl::DataLossError(applied.message());
    return applied;
  }
  applied_seq_ = record.seq();
  staged_seq_ = record.seq();
  return absl::OkStatus();
}

uint64_t MetadataDb::applied_seq() const {
  absl::MutexLock lock(&write_mu_);
  return applied_seq_;
}

MetadataDb::GroupCommitStats MetadataDb::group_commit_stats() const {
  absl::MutexLock lock(&write_mu_);
  return stats_;
}

absl::Status MetadataDb::SyncWal() { return FromRocks(rep_->db->SyncWAL(), "sync wal"); }

absl::StatusOr<proto::Inode> MetadataDb::GetInode(uint64_t ino, View view, const Snapshot* at) {
  auto value = ReadKey(InodeKey(ino), absl::StrCat("inode ", ino), view, at);
  if (!value.ok()) return value.status();
  return Parse<proto::Inode>(*value, "inode");
}

absl::StatusOr<proto::DirEntry> MetadataDb::GetDirEntry(uint64_t parent, const std::string& name,
                                                        View view, const Snapshot* at) {
  auto value = ReadKey(DirEntryKey(parent, name), absl::StrCat("entry '", name, "'"), view, at);
  if (!value.ok()) return value.status();
  return Parse<proto::DirEntry>(*value, "directory entry");
}

absl::StatusOr<MetadataDb::DirPage> MetadataDb::ListDir(uint64_t parent,
                                                        const std::string& start_after,
                                                        size_t max_entries, size_t max_bytes,
                                                        View view) {
  DirPage page;
  size_t bytes = 0;
  absl::Status parse_status;
  // Keys are (parent, name), so seeking to (parent, start_after) and
  // skipping that key resumes right after the last name returned, whether
  // or not it still exists.
  const std::string start_key = DirEntryKey(parent, start_after);
  absl::Status s =
      ScanKeys(DirPrefix(parent), start_key, view, [&](const std::string& k, const std::string& v) {
        if (!start_after.empty() && k == start_key) return true;
        if (page.entries.size() >= max_entries) {
          page.more = true;
          return false;
        }
        auto entry = Parse<proto::DirEntry>(v, "directory entry");
        if (!entry.ok()) {
          parse_status = entry.status();
          return false;
        }
        // As a repeated field of the reply: tag, length, entry.
        const size_t entry_bytes = format::internal::LengthFieldBytes(entry->ByteSizeLong());
        if (!page.entries.empty() && bytes + entry_bytes > max_bytes) {
          page.more = true;
          return false;
        }
        bytes += entry_bytes;
        page.entries.push_back(std::move(*entry));
        return true;
      });
  if (!s.ok()) return s;
  if (!parse_status.ok()) return parse_status;
  return page;
}

absl::StatusOr<bool> MetadataDb::HasEntries(uint64_t parent) {
  bool found = false;
  absl::Status s = ScanKeys(DirPrefix(parent), DirPrefix(parent), View::kLatest,
                            [&](const std::string&, const std::string&) {
                              found = true;
                              return false;
                            });
  if (!s.ok()) return s;
  return found;
}

absl::StatusOr<uint64_t> MetadataDb::GetCounter(MetaCounter counter) {
  auto value = ReadKey(CounterKey(counter), "counter", View::kLatest);
  if (absl::IsNotFound(value.status())) return 0;
  if (!value.ok()) return value.status();
  if (value->size() != 8) return absl::DataLossError("bad counter value in metadata db");
  return util::DecodeBigEndian64(value->data());
}

template <typename Message>
absl::StatusOr<std::vector<Message>> MetadataDb::ListMessages(char prefix, absl::string_view what) {
  std::vector<Message> messages;
  absl::Status parse_status;
  absl::Status s = ScanKeys(std::string(1, prefix), std::string(1, prefix), View::kLatest,
                            [&](const std::string&, const std::string& v) {
                              auto message = Parse<Message>(v, what);
                              if (!message.ok()) {
                                parse_status = message.status();
                                return false;
                              }
                              messages.push_back(std::move(*message));
                              return true;
                            });
  if (!s.ok()) return s;
  if (!parse_status.ok()) return parse_status;
  return messages;
}

absl::StatusOr<std::vector<proto::RegisterServerRequest>> MetadataDb::ListServers() {
  return ListMessages<proto::RegisterServerRequest>(kServerPrefix, "server");
}

absl::StatusOr<std::vector<uint64_t>> MetadataDb::ListPendingDeletions(uint64_t server_id,
                                                                       size_t max_count) {
  std::vector<uint64_t> ids;
  if (max_count == 0) return ids;
  absl::Status s = ScanKeys(PendingPrefix(server_id), PendingPrefix(server_id), View::kLatest,
                            [&](const std::string& k, const std::string&) {
                              if (k.size() == 17)
                                ids.push_back(util::DecodeBigEndian64(k.data() + 9));
                              return ids.size() < max_count;
                            });
  if (!s.ok()) return s;
  return ids;
}

absl::StatusOr<bool> MetadataDb::HasPendingDeletion(uint64_t server_id, uint64_t segment_id) {
  auto value = ReadKey(PendingKey(server_id, segment_id), "pending deletion", View::kLatest);
  if (absl::IsNotFound(value.status())) return false;
  if (!value.ok()) return value.status();
  return true;
}

absl::StatusOr<proto::SharedSegment> MetadataDb::GetSharedSegment(uint64_t segment_id) {
  auto value = ReadKey(SharedSegmentKey(segment_id), "shared segment", View::kLatest);
  if (absl::IsNotFound(value.status())) return proto::SharedSegment();
  if (!value.ok()) return value.status();
  return Parse<proto::SharedSegment>(*value, "shared segment");
}

absl::StatusOr<std::vector<uint64_t>> MetadataDb::ListOrphans() {
  std::vector<uint64_t> inos;
  absl::Status s = ScanKeys(std::string(1, kOrphanPrefix), std::string(1, kOrphanPrefix),
                            View::kLatest, [&](const std::string& k, const std::string&) {
                              if (k.size() == 9) inos.push_back(util::DecodeBigEndian64(&k[1]));
                              return true;
                            });
  if (!s.ok()) return s;
  return inos;
}

absl::StatusOr<std::vector<std::pair<uint64_t, proto::SharedSegment>>>
MetadataDb::ListSharedSegments() {
  std::vector<std::pair<uint64_t, proto::SharedSegment>> records;
  absl::Status parsed;
  absl::Status s =
      ScanKeys(std::string(1, kSharedSegmentPrefix), std::string(1, kSharedSegmentPrefix),
               View::kLatest, [&](const std::string& key, const std::string& value) {
                 auto record = Parse<proto::SharedSegment>(value, "shared segment");
                 if (!record.ok() || key.size() != 9) {
                   parsed = record.ok() ? absl::DataLossError("bad shared segment key")
                                        : record.status();
                   return false;
                 }
                 records.emplace_back(util::DecodeBigEndian64(&key[1]), std::move(*record));
                 return true;
               });
  if (!s.ok()) return s;
  if (!parsed.ok()) return parsed;
  return records;
}

absl::StatusOr<std::vector<proto::SnapshotRecord>> MetadataDb::ListSnapshots() {
  return ListMessages<proto::SnapshotRecord>(kSnapshotPrefix, "snapshot");
}

absl::StatusOr<proto::CallRecord> MetadataDb::GetCallRecord(const proto::CallId& call) {
  auto value =
      ReadKey(CallRecordKey(call.mount_id(), call.seq()),
              absl::StrCat("call record ", call.mount_id(), "/", call.seq()), View::kLatest);
  if (!value.ok()) return value.status();
  return Parse<proto::CallRecord>(*value, "call record");
}

absl::StatusOr<uint64_t> MetadataDb::DeleteCallRecordsBefore(int64_t time_ns) {
  std::vector<std::string> expired;
  absl::Status parse_status;
  absl::Status s = ScanKeys(std::string(1, kCallRecordPrefix), std::string(1, kCallRecordPrefix),
                            View::kDurable, [&](const std::string& k, const std::string& v) {
                              auto record = Parse<proto::CallRecord>(v, "call record");
                              if (!record.ok()) {
                                parse_status = record.status();
                                return false;
                              }
                              if (record->time_ns() < time_ns) expired.push_back(k);
                              return true;
                            });
  RETURN_IF_ERROR(s);
  RETURN_IF_ERROR(parse_status);
  // The durable view (no lock held across the scan): a record only staged
  // is newer than any cutoff. Through Write, so that the journal carries
  // the deletions; in batches
  // small enough for one journal record.
  uint64_t deleted = 0;
  while (deleted < expired.size()) {
    Batch batch;
    for (; deleted < expired.size() && batch.count() < kCallRecordDeletesPerBatch; ++deleted) {
      batch.rep_->batch.Delete(expired[deleted]).PermitUncheckedError();
    }
    RETURN_IF_ERROR(Write(batch));
  }
  return deleted;
}

absl::StatusOr<uint64_t> MetadataDb::CountInodes() {
  uint64_t count = 0;
  absl::Status s = ScanKeys(std::string(1, kInodePrefix), std::string(1, kInodePrefix),
                            View::kLatest, [&](const std::string&, const std::string&) {
                              ++count;
                              return true;
                            });
  if (!s.ok()) return s;
  return count;
}

}  // namespace logfs::meta

namespace logfs::meta {

absl::StatusOr<std::vector<proto::Inode>> MetadataDb::ListInodes(uint64_t start_ino,
                                                                 size_t max_count) {
  std::vector<proto::Inode> inodes;
  if (max_count == 0) return inodes;
  absl::Status parse_status;
  RETURN_IF_ERROR(ScanKeys(std::string(1, kInodePrefix), InodeKey(start_ino), View::kLatest,
                           [&](const std::string&, const std::string& v) {
                             auto inode = Parse<proto::Inode>(v, "inode");
                             if (!inode.ok()) {
                               parse_status = inode.status();
                               return false;
                             }
                             inodes.push_back(std::move(*inode));
                             return inodes.size() < max_count;
                           }));
  RETURN_IF_ERROR(parse_status);
  return inodes;
}

}  // namespace logfs::meta

namespace logfs::meta {

// For store/meta/metadata_db_checkpoint.cc.
rocksdb::DB* MetadataDb::rocks_db() const { return rep_->db.get(); }
std::string MetadataDb::CounterKeyForCheckpoint(MetaCounter counter) { return CounterKey(counter); }

}  // namespace logfs::meta
