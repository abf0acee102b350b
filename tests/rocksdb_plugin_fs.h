// The logfs RocksDB FileSystem (rocksdb_fs/) inside a test process, for
// tests/rocksdb_plugin_test.cc and tests/rocksdb_plugin_fault_test.cc.
#pragma once

#include <memory>
#include <string>

#include "rocksdb/file_system.h"

namespace logfs::testing {

// The FileSystem of `uri` ("logfs://META[/ROOT]" or RocksDB's
// "id=...;name=value" form), from RocksDB's default object library, where
// the plugin's factory is registered on the first call (as loading
// build/liblogfs_rocksdb.so does); null, with a test failure, if RocksDB
// refuses it. It connects to meta before it returns.
std::shared_ptr<rocksdb::FileSystem> PluginFileSystem(const std::string& uri);

}  // namespace logfs::testing
