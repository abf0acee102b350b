#include "rocksdb_fs/names.h"

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "fsclient/path_client.h"
#include "src/status/posix_error.h"

namespace logfs::rocksdb_fs {

absl::StatusOr<Uri> ParseUri(absl::string_view uri) {
  constexpr absl::string_view kScheme = "logfs://";
  if (!absl::ConsumePrefix(&uri, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", uri, "' is not a logfs URI (logfs://META_LIST[/ROOT])"));
  }
  Uri out;
  const size_t slash = uri.find('/');
  out.meta = std::string(uri.substr(0, slash));
  if (out.meta.empty()) {
    return absl::InvalidArgumentError(
        "a logfs URI names meta: logfs://HOST:PORT[,HOST:PORT...][/ROOT]");
  }
  out.root = slash == absl::string_view::npos ? "/" : std::string(uri.substr(slash));
  auto components = fsclient::SplitPath(out.root);
  if (!components.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the root of '", kScheme, uri, "': ", components.status().message()));
  }
  out.root.clear();
  for (const std::string& name : *components) absl::StrAppend(&out.root, "/", name);
  if (out.root.empty()) out.root = "/";
  return out;
}

std::string UnderRoot(const std::string& root, absl::string_view path) {
  absl::string_view rest = absl::StripPrefix(path, "/");
  if (root == "/") return absl::StrCat("/", rest);
  return rest.empty() ? root : absl::StrCat(root, "/", rest);
}

namespace {

// True for a name all digits then `suffix` ("000012.log").
bool NumberedWith(absl::string_view name, absl::string_view suffix) {
  if (!absl::ConsumeSuffix(&name, suffix) || name.empty()) return false;
  uint64_t number;
  return absl::SimpleAtoi(name, &number);
}

}  // namespace

proto::FileKind KindOf(absl::string_view path) {
  const size_t slash = path.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (NumberedWith(name, ".log") || absl::StartsWith(name, "MANIFEST-") || name == "LOG") {
    return proto::KIND_WAL;
  }
  return proto::KIND_BLOCK;
}

rocksdb::IOStatus ToIOStatus(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return rocksdb::IOStatus::OK();
  const std::string message = absl::StrCat(context, ": ", status.message());
  switch (AttachedErrno(status)) {
    case ENOENT:
      return rocksdb::IOStatus::PathNotFound(message);
    case ENOSPC:
      return rocksdb::IOStatus::NoSpace(message);
    case ENOTSUP:
    case EXDEV:  // a link logfs cannot make: RocksDB copies instead, as for posix's
      return rocksdb::IOStatus::NotSupported(message);
    default:
      return rocksdb::IOStatus::IOError(message);
  }
}

}  // namespace logfs::rocksdb_fs
