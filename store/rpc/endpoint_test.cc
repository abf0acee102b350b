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

TEST(EndpointTest, SplitHostPortTakesHostNamesAndRefusesBadOnes) {
  auto named = SplitHostPort("meta-1.rack2.example.com:7000");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ("meta-1.rack2.example.com", named->host);
  EXPECT_EQ(7000, named->port);
  EXPECT_FALSE(named->numeric);
  auto v6 = SplitHostPort("[::1]:7001");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ("::1", v6->host);
  EXPECT_TRUE(v6->numeric);
  EXPECT_EQ("127.0.0.1", SplitHostPort("localhost:1")->host);
  const std::string long_label(64, 'a');
  for (const std::string& bad :
       {std::string("-meta:1"), std::string("meta-:1"), std::string("a..b:1"), std::string("a_b:1"),
        std::string("[meta]:1"), std::string(":1"), long_label + ":1", std::string("meta:70000"),
        std::string("10.0.0:7000"), std::string("127.1:7000"), std::string("300.1.1.1:7000")}) {
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, SplitHostPort(bad).status().code()) << bad;
  }
  // ParseEndpoint binds: it needs a number, and says so.
  auto unresolved = ParseEndpoint("meta1:7000");
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, unresolved.status().code());
  EXPECT_NE(std::string::npos, unresolved.status().message().find("numeric"))
      << unresolved.status();
}

TEST(EndpointTest, AdvertisedAddressDefaultsToTheBoundOneUnlessItIsAWildcard) {
  EXPECT_EQ("127.0.0.1:7100", *AdvertisedAddress("127.0.0.1:0", "127.0.0.1:7100", ""));
  EXPECT_EQ("[::1]:7100", *AdvertisedAddress("[::1]:0", "[::1]:7100", ""));
  for (const char* wildcard : {"0.0.0.0:7100", "[::]:7100"}) {
    auto advertised = AdvertisedAddress(wildcard, "0.0.0.0:7100", "");
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, advertised.status().code()) << wildcard;
    EXPECT_NE(std::string::npos, advertised.status().message().find("--advertise"))
        << advertised.status();
  }
}

TEST(EndpointTest, AdvertisedAddressTakesTheBoundPortWhenItHasNone) {
  EXPECT_EQ("10.0.0.5:7100", *AdvertisedAddress("0.0.0.0:7100", "0.0.0.0:7100", "10.0.0.5:7100"));
  EXPECT_EQ("10.0.0.5:41234", *AdvertisedAddress("0.0.0.0:0", "0.0.0.0:41234", "10.0.0.5"));
  EXPECT_EQ("10.0.0.5:41234", *AdvertisedAddress("0.0.0.0:0", "0.0.0.0:41234", "10.0.0.5:0"));
  EXPECT_EQ("[fd00::5]:41234", *AdvertisedAddress("[::]:0", "[::]:41234", "fd00::5"));
  EXPECT_EQ("[fd00::5]:41234", *AdvertisedAddress("[::]:0", "[::]:41234", "[fd00::5]"));
  EXPECT_EQ("[fd00::5]:7000", *AdvertisedAddress("[::]:0", "[::]:41234", "[fd00::5]:7000"));
  EXPECT_EQ("db1.example.com:41234",
            *AdvertisedAddress("0.0.0.0:0", "0.0.0.0:41234", "db1.example.com"));
  EXPECT_EQ("db1:7100", *AdvertisedAddress("0.0.0.0:7100", "0.0.0.0:7100", "db1:7100"));
}

TEST(EndpointTest, AdvertisedAddressRefusesWildcardsAndGarbage) {
  for (const char* bad :
       {"0.0.0.0", "0.0.0.0:7100", "[::]", "db_1.example.com", "-db1", "10.0.0.5:x"}) {
    auto advertised = AdvertisedAddress("0.0.0.0:0", "0.0.0.0:41234", bad);
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, advertised.status().code()) << bad;
  }
}

}  // namespace
}  // namespace logfs::rpc
