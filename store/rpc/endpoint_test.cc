#include "store/rpc/endpoint.h"

#include <gtest/gtest.h>

namespace logfs::rpc {
namespace {

TEST(EndpointTest, ParsesNumericHostsAndLocalhost) {
  auto v4 = ParseEndpoint("10.1.2.3:7000");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ("10.1.2.3", v4->address().to_string());
  EXPECT_EQ(7000, v4->port());
  auto local = ParseEndpoint("localhost:0");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ("127.0.0.1", local->address().to_string());
  EXPECT_EQ(0, local->port());
  auto v6 = ParseEndpoint("[::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_TRUE(v6->address().is_v6());
  EXPECT_EQ(65535, v6->port());
}

TEST(EndpointTest, RejectsWhatIsNotHostPort) {
  for (const char* bad :
       {"7000", "host:", "1.2.3.4:65536", "1.2.3.4:-1", "example.com:80", "1.2.3.4:80x"}) {
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, ParseEndpoint(bad).status().code()) << bad;
  }
}

}  // namespace
}  // namespace logfs::rpc
