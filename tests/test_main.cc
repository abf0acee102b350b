// GoogleTest main for logfs_test: initializes glog and prints a plain
// "N passed, N failed" closing line for CI.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and up
  int rc = RUN_ALL_TESTS();
  const auto* unit = testing::UnitTest::GetInstance();
  std::printf("\n%d passed, %d failed, %d skipped\n", unit->successful_test_count(),
              unit->failed_test_count(), unit->skipped_test_count());
  return rc;
}
