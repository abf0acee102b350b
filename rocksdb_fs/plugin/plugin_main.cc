// What makes build/liblogfs_rocksdb.so a RocksDB plugin: loading it (with
// LD_PRELOAD for Debian's stock db_bench and ldb, or by linking it)
// registers the "logfs://" FileSystem with RocksDB's default object
// library, so FileSystem::CreateFromString, `db_bench --fs_uri` and
// `ldb --fs_uri` find it. docs/rocksdb.md says how to use it.
#include <string>

#include "rocksdb/utilities/object_registry.h"
#include "rocksdb_fs/logfs_file_system.h"

namespace {

// Runs when the library is loaded, after librocksdb's own initializers
// (the library depends on it, and the loader initializes dependencies
// first).
[[maybe_unused]] const int registered = logfs::rocksdb_fs::RegisterLogfsFileSystem(
    *rocksdb::ObjectLibrary::Default(), "");

}  // namespace

// For RocksDB's registrar convention (ObjectLibrary::Register): a program
// that loads the library with dlopen may call it by this unmangled name.
extern "C" int logfs_rocksdb_register(rocksdb::ObjectLibrary& library, const std::string& arg) {
  return logfs::rocksdb_fs::RegisterLogfsFileSystem(library, arg);
}
