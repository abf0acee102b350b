#include "store/meta/metadata_db.h"

#include <glog/logging.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
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
};

struct MetadataDb::Rep {
  std::string path;
  std::unique_ptr<rocksdb::DB> db;

  // Calls fn(key, value) for each key starting with `prefix`, in key order,
  // until fn returns false.
  template <typename Fn>
  absl::Status Scan(const std::string& prefix, Fn fn) {
    return Scan(prefix, prefix, std::move(fn));
  }
  // The same from the first key >= `start` (which starts with `prefix`).
  template <typename Fn>
  absl::Status Scan(const std::string& prefix, const std::string& start, Fn fn) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (!fn(it->key().ToString(), it->value().ToString())) break;
    }
    return FromRocks(it->status(), "scan");
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::string_view what) {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key, &value);
    if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat(what, " not found"));
    if (!s.ok()) return FromRocks(s, what);
    return value;
  }
};

MetadataDb::Batch::Batch() : rep_(std::make_unique<Rep>()) {}
MetadataDb::Batch::~Batch() = default;

void MetadataDb::Batch::PutInode(const proto::Inode& inode) {
  rep_->batch.Put(InodeKey(inode.attr().ino()), inode.SerializeAsString()).PermitUncheckedError();
}
void MetadataDb::Batch::DeleteInode(uint64_t ino) {
  rep_->batch.Delete(InodeKey(ino)).PermitUncheckedError();
}
void MetadataDb::Batch::PutDirEntry(uint64_t parent, const proto::DirEntry& entry) {
  rep_->batch.Put(DirEntryKey(parent, entry.name()), entry.SerializeAsString())
      .PermitUncheckedError();
}
void MetadataDb::Batch::DeleteDirEntry(uint64_t parent, const std::string& name) {
  rep_->batch.Delete(DirEntryKey(parent, name)).PermitUncheckedError();
}
void MetadataDb::Batch::PutCounter(MetaCounter counter, uint64_t value) {
  char buf[8];
  util::EncodeBigEndian64(buf, value);
  rep_->batch.Put(CounterKey(counter), rocksdb::Slice(buf, 8)).PermitUncheckedError();
}
void MetadataDb::Batch::PutServer(const proto::RegisterServerRequest& server) {
  rep_->batch.Put(ServerKey(server.server_id()), server.SerializeAsString())
      .PermitUncheckedError();
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
void MetadataDb::Batch::PutCallRecord(const proto::CallId& call, const proto::CallRecord& record) {
  rep_->batch.Put(CallRecordKey(call.mount_id(), call.seq()), record.SerializeAsString())
      .PermitUncheckedError();
}
void MetadataDb::Batch::DeleteCallRecord(uint64_t mount_id, uint64_t seq) {
  rep_->batch.Delete(CallRecordKey(mount_id, seq)).PermitUncheckedError();
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
  if (absl::Status synced = options.file_system->SyncDir(env::Dirname(options.path)); !synced.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot sync the metadata db's parent directory: ", synced.message()));
  }
  auto opened = std::unique_ptr<MetadataDb>(new MetadataDb(std::move(rep)));
  ASSIGN_OR_RETURN(uint64_t applied, opened->GetCounter(MetaCounter::kAppliedSeq));
  {
    absl::MutexLock lock(&opened->write_mu_);
    opened->applied_seq_ = applied;
  }
  return opened;
}

MetadataDb::MetadataDb(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}

MetadataDb::~MetadataDb() {
  if (rep_->db != nullptr) rep_->db->Close().PermitUncheckedError();  // best effort at exit
}

absl::Status MetadataDb::Write(Batch& batch) {
  absl::MutexLock lock(&write_mu_);
  if (!journal_failure_.ok()) return journal_failure_;
  const uint64_t seq = applied_seq_ + 1;
  if (absl::Status appended = journal_->Append(seq, batch.rep_->batch.Data()); !appended.ok()) {
    if (absl::IsInvalidArgument(appended)) return appended;
    FailJournalLocked(appended);
    return journal_failure_;
  }
  batch.PutCounter(MetaCounter::kAppliedSeq, seq);
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  absl::Status applied =
      FromRocks(rep_->db->Write(write_options, &batch.rep_->batch), "metadata write");
  if (!applied.ok()) {
    // A lone meta's record exists nowhere else: nothing happened. A
    // replicated one is in the journal but not here.
    if (journal_ != &local_journal_) FailJournalLocked(applied);
    return applied;
  }
  applied_seq_ = seq;
  return absl::OkStatus();
}

void MetadataDb::FailJournalLocked(const absl::Status& why) {
  journal_failure_ = format::NotActiveMetaError(
      absl::StrCat("meta stopped writing after a journal failure: ", why.message()), "");
  LOG(ERROR) << "metadata writes stop: journal record " << applied_seq_ + 1 << ": " << why;
  if (on_journal_failure_) {
    auto handler = std::move(on_journal_failure_);
    on_journal_failure_ = nullptr;
    handler(why);
  }
}

void MetadataDb::SetJournal(MetaJournal* journal) {
  absl::MutexLock lock(&write_mu_);
  journal_ = journal != nullptr ? journal : &local_journal_;
}

void MetadataDb::SetJournalFailureHandler(std::function<void(const absl::Status&)> handler) {
  absl::MutexLock lock(&write_mu_);
  on_journal_failure_ = std::move(handler);
}

absl::Status MetadataDb::ApplyJournalRecord(const proto::MetaJournalRecord& record) {
  absl::MutexLock lock(&write_mu_);
  if (record.seq() <= applied_seq_) return absl::OkStatus();
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
  return absl::OkStatus();
}

uint64_t MetadataDb::applied_seq() const {
  absl::MutexLock lock(&write_mu_);
  return applied_seq_;
}

absl::Status MetadataDb::SyncWal() { return FromRocks(rep_->db->SyncWAL(), "sync wal"); }

absl::StatusOr<proto::Inode> MetadataDb::GetInode(uint64_t ino) {
  auto value = rep_->Get(InodeKey(ino), absl::StrCat("inode ", ino));
  if (!value.ok()) return value.status();
  return Parse<proto::Inode>(*value, "inode");
}

absl::StatusOr<proto::DirEntry> MetadataDb::GetDirEntry(uint64_t parent, const std::string& name) {
  auto value = rep_->Get(DirEntryKey(parent, name), absl::StrCat("entry '", name, "'"));
  if (!value.ok()) return value.status();
  return Parse<proto::DirEntry>(*value, "directory entry");
}

absl::StatusOr<MetadataDb::DirPage> MetadataDb::ListDir(uint64_t parent,
                                                        const std::string& start_after,
                                                        size_t max_entries, size_t max_bytes) {
  DirPage page;
  size_t bytes = 0;
  absl::Status parse_status;
  // Keys are (parent, name), so seeking to (parent, start_after) and
  // skipping that key resumes right after the last name returned, whether
  // or not it still exists.
  const std::string start_key = DirEntryKey(parent, start_after);
  absl::Status s = rep_->Scan(DirPrefix(parent), start_key, [&](const std::string& k,
                                                               const std::string& v) {
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
  absl::Status s = rep_->Scan(DirPrefix(parent), [&](const std::string&, const std::string&) {
    found = true;
    return false;
  });
  if (!s.ok()) return s;
  return found;
}

absl::StatusOr<uint64_t> MetadataDb::GetCounter(MetaCounter counter) {
  auto value = rep_->Get(CounterKey(counter), "counter");
  if (absl::IsNotFound(value.status())) return 0;
  if (!value.ok()) return value.status();
  if (value->size() != 8) return absl::DataLossError("bad counter value in metadata db");
  return util::DecodeBigEndian64(value->data());
}

absl::StatusOr<std::vector<proto::RegisterServerRequest>> MetadataDb::ListServers() {
  std::vector<proto::RegisterServerRequest> servers;
  absl::Status parse_status;
  absl::Status s = rep_->Scan(std::string(1, kServerPrefix),
                              [&](const std::string&, const std::string& v) {
                                auto server = Parse<proto::RegisterServerRequest>(v, "server");
                                if (!server.ok()) {
                                  parse_status = server.status();
                                  return false;
                                }
                                servers.push_back(std::move(*server));
                                return true;
                              });
  if (!s.ok()) return s;
  if (!parse_status.ok()) return parse_status;
  return servers;
}

absl::StatusOr<std::vector<uint64_t>> MetadataDb::ListPendingDeletions(uint64_t server_id,
                                                                      size_t max_count) {
  std::vector<uint64_t> ids;
  if (max_count == 0) return ids;
  absl::Status s = rep_->Scan(PendingPrefix(server_id), [&](const std::string& k,
                                                            const std::string&) {
    if (k.size() == 17) ids.push_back(util::DecodeBigEndian64(k.data() + 9));
    return ids.size() < max_count;
  });
  if (!s.ok()) return s;
  return ids;
}

absl::StatusOr<bool> MetadataDb::HasPendingDeletion(uint64_t server_id, uint64_t segment_id) {
  auto value = rep_->Get(PendingKey(server_id, segment_id), "pending deletion");
  if (absl::IsNotFound(value.status())) return false;
  if (!value.ok()) return value.status();
  return true;
}

absl::StatusOr<std::vector<uint64_t>> MetadataDb::ListOrphans() {
  std::vector<uint64_t> inos;
  absl::Status s = rep_->Scan(std::string(1, kOrphanPrefix),
                              [&](const std::string& k, const std::string&) {
                                if (k.size() == 9) inos.push_back(util::DecodeBigEndian64(&k[1]));
                                return true;
                              });
  if (!s.ok()) return s;
  return inos;
}

absl::StatusOr<proto::CallRecord> MetadataDb::GetCallRecord(const proto::CallId& call) {
  auto value = rep_->Get(CallRecordKey(call.mount_id(), call.seq()),
                         absl::StrCat("call record ", call.mount_id(), "/", call.seq()));
  if (!value.ok()) return value.status();
  return Parse<proto::CallRecord>(*value, "call record");
}

absl::StatusOr<uint64_t> MetadataDb::DeleteCallRecordsBefore(int64_t time_ns) {
  std::vector<std::string> expired;
  absl::Status parse_status;
  absl::Status s = rep_->Scan(std::string(1, kCallRecordPrefix),
                              [&](const std::string& k, const std::string& v) {
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
  // Through Write, so that the journal carries the deletions; in batches
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
  absl::Status s = rep_->Scan(std::string(1, kInodePrefix),
                              [&](const std::string&, const std::string&) {
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
  const std::string prefix(1, kInodePrefix);
  std::unique_ptr<rocksdb::Iterator> it(rep_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(InodeKey(start_ino));
       inodes.size() < max_count && it->Valid() && it->key().starts_with(prefix); it->Next()) {
    ASSIGN_OR_RETURN(proto::Inode inode, Parse<proto::Inode>(it->value().ToString(), "inode"));
    inodes.push_back(std::move(inode));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scan of inodes"));
  return inodes;
}

}  // namespace logfs::meta

namespace logfs::meta {

// For store/meta/metadata_db_checkpoint.cc.
rocksdb::DB* MetadataDb::rocks_db() const { return rep_->db.get(); }
std::string MetadataDb::CounterKeyForCheckpoint(MetaCounter counter) { return CounterKey(counter); }

}  // namespace logfs::meta
