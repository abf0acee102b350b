#include "tests/rocksdb_plugin_fs.h"

#include <gtest/gtest.h>

#include <mutex>

#include "rocksdb/convenience.h"
#include "rocksdb/utilities/object_registry.h"
#include "rocksdb_fs/logfs_file_system.h"

namespace logfs::testing {

std::shared_ptr<rocksdb::FileSystem> PluginFileSystem(const std::string& uri) {
  static std::once_flag once;
  std::call_once(once, [] {
    rocksdb_fs::RegisterLogfsFileSystem(*rocksdb::ObjectLibrary::Default(), "");
  });
  std::shared_ptr<rocksdb::FileSystem> fs;
  rocksdb::Status s = rocksdb::FileSystem::CreateFromString(rocksdb::ConfigOptions(), uri, &fs);
  EXPECT_TRUE(s.ok()) << uri << ": " << s.ToString();
  return s.ok() ? fs : nullptr;
}

}  // namespace logfs::testing
