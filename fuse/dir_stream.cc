#include "fuse/dir_stream.h"

#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"

namespace logfs::fuse {
namespace {

proto::DirEntry Dot(const char* name, uint64_t ino) {
  proto::DirEntry dot;
  dot.set_name(name);
  dot.set_ino(ino);
  dot.set_mode(S_IFDIR);
  return dot;
}

}  // namespace

DirStream::DirStream(uint64_t ino, FetchPage fetch) : ino_(ino), fetch_(std::move(fetch)) {}

absl::Status DirStream::Open() {
  RETURN_IF_ERROR(Restart());
  fresh_ = true;
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const proto::DirEntry>> DirStream::EntriesAt(uint64_t position) {
  const bool reuse = fresh_ && position == 0;
  fresh_ = false;
  if (!loaded_ || (position == 0 && !reuse) || position < page_position_) {
    RETURN_IF_ERROR(Restart());
  }
  // Each turn moves one page on, and a page with more to follow holds at
  // least one entry (Load), so this ends: at `position` or at the end.
  while (position >= page_position_ + page_.size()) {
    if (!more_) return absl::Span<const proto::DirEntry>();
    RETURN_IF_ERROR(NextPage());
  }
  const size_t skip = static_cast<size_t>(position - page_position_);
  return absl::MakeConstSpan(page_).subspan(skip);
}

void DirStream::Export(proto::HandedOffDir* out) const {
  out->mutable_page()->Assign(page_.begin(), page_.end());
  out->set_page_position(page_position_);
  out->set_cursor(cursor_);
  out->set_more(more_);
  out->set_loaded(loaded_);
  out->set_fresh(fresh_);
}

void DirStream::Restore(const proto::HandedOffDir& in) {
  page_.assign(in.page().begin(), in.page().end());
  page_position_ = in.page_position();
  cursor_ = in.cursor();
  more_ = in.more();
  loaded_ = in.loaded();
  fresh_ = in.fresh();
}

absl::Status DirStream::Restart() {
  page_position_ = 0;
  cursor_.clear();
  return Load("", /*first=*/true);
}

absl::Status DirStream::NextPage() {
  page_position_ += page_.size();
  return Load(cursor_, /*first=*/false);
}

absl::Status DirStream::Load(const std::string& start_after, bool first) {
  loaded_ = false;
  page_.clear();
  ASSIGN_OR_RETURN(proto::ReaddirResponse response, fetch_(start_after));
  if (response.more() && response.entries_size() == 0) {
    return absl::InternalError(absl::StrCat("readdir of inode ", ino_, " after '", start_after,
                                            "': meta sent an empty page with more to follow"));
  }
  if (first) {
    page_.push_back(Dot(".", ino_));
    page_.push_back(Dot("..", ino_));
  }
  page_.reserve(page_.size() + response.entries_size());
  for (auto& entry : *response.mutable_entries()) page_.push_back(std::move(entry));
  if (response.entries_size() > 0) cursor_ = page_.back().name();
  more_ = response.more();
  loaded_ = true;
  return absl::OkStatus();
}

}  // namespace logfs::fuse
