// Regression test: read-only shared mmap of sealed files (DESIGN §2). Before
// the fix a sealed WAL file was always opened in direct I/O mode, and
// mmap(PROT_READ, MAP_SHARED) of it failed with ENODEV on every mount. A
// file being written keeps direct I/O, so a shared mapping of it is
// refused with ENODEV (MAP_PRIVATE works).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// The bytes of `path` through a read-only mapping with `flags`; "" and
// *err = errno on failure.
std::string MapAndRead(const std::string& path, size_t size, int flags, int* err) {
  *err = 0;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    *err = errno;
    return "";
  }
  void* p = mmap(nullptr, size, PROT_READ, flags, fd, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    close(fd);
    return "";
  }
  std::string out(static_cast<const char*>(p), size);
  munmap(p, size);
  close(fd);
  return out;
}

TEST(MmapTest, SealedFilesOfBothKindsMapSharedReadOnlyOnEveryMount) {
  MountedClusterOptions options;
  options.mounts = 2;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  const std::string wal = Pattern(10000, 1);
  const std::string block = Pattern(70000, 2);
  ASSERT_TRUE(WriteFile(c.Path("wal/sealed.log"), wal).ok());
  ASSERT_TRUE(WriteFile(c.Path("sealed.sst"), block).ok());
  for (int m = 0; m < 2; ++m) {
    int err;
    EXPECT_TRUE(wal == MapAndRead(c.Path("wal/sealed.log", m), wal.size(), MAP_SHARED, &err))
        << "mount " << m << ": " << strerror(err);
    EXPECT_TRUE(block == MapAndRead(c.Path("sealed.sst", m), block.size(), MAP_SHARED, &err))
        << "mount " << m << ": " << strerror(err);
  }

  // A WAL file open for write: direct I/O, so no shared mapping; a private
  // one still works.
  int fd = open(c.Path("wal/sealed.log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(4, write(fd, "more", 4));
  ASSERT_EQ(0, fsync(fd));
  int err;
  MapAndRead(c.Path("wal/sealed.log", 1), wal.size(), MAP_SHARED, &err);
  EXPECT_EQ(ENODEV, err);
  EXPECT_TRUE(wal == MapAndRead(c.Path("wal/sealed.log", 1), wal.size(), MAP_PRIVATE, &err))
      << strerror(err);
  ASSERT_EQ(0, close(fd));
  // Sealed again: mappable, with the appended bytes, once mount 1's kernel
  // has let go of the size it cached before the append (the sealed-file
  // attribute timeout, 1 s) and the writer has let go of its lease. close()
  // returns when FLUSH has sealed the bytes; the kernel sends RELEASE, which
  // ends the lease, after close() has returned, and until then an open on
  // mount 1 still finds a file being written (direct I/O: ENODEV).
  struct stat st;
  std::string mapped;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (true) {
    ASSERT_EQ(0, stat(c.Path("wal/sealed.log", 1).c_str(), &st)) << strerror(errno);
    if (st.st_size == static_cast<off_t>(wal.size() + 4)) {
      mapped = MapAndRead(c.Path("wal/sealed.log", 1), wal.size() + 4, MAP_SHARED, &err);
      if (err != ENODEV) break;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(static_cast<off_t>(wal.size() + 4), st.st_size);
  EXPECT_EQ(0, err) << strerror(err);
  ASSERT_GE(mapped.size(), 4u);
  EXPECT_TRUE(wal + "more" == mapped) << "mapped " << mapped.size() << " bytes ending in '"
                                      << mapped.substr(mapped.size() - 4) << "'";
}

}  // namespace
}  // namespace logfs::testing
