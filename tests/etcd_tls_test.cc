// Meta's etcd traffic over TLS with client-certificate auth (issue 34
// item 4): a real 3-member etcd with TLS on client and peer URLs and
// --client-cert-auth, certificates made by packaging/make-etcd-certs.sh
// (the commands docs/OPERATIONS.md gives). The client with the cluster's
// CA and a client certificate it signed reads and writes; one with a
// certificate of another CA, with no certificate, trusting another CA,
// naming a host the member's certificate does not, or without TLS is
// refused; three meta replicas with the right files serve a mount, and
// one with a wrong certificate exits with an error that names etcd.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "store/meta/ha/etcd/etcd_client.h"
#include "tests/meta_ha_cluster.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

using etcd::EtcdClient;
using etcd::EtcdClientOptions;
using etcd::EtcdTlsFiles;

constexpr absl::Duration kCallTimeout = absl::Seconds(2);

class EtcdTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/logfs-etcd-certs-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    certs_ = new std::string(tmpl);
    const std::string script = SourceDir() + "/packaging/make-etcd-certs.sh";
    for (const char* ca : {"good", "rogue"}) {
      CommandResult made = RunCommand(absl::StrCat(script, " ", *certs_, "/", ca, " 127.0.0.1 2>&1"));
      ASSERT_EQ(0, made.exit_code) << made.output;
    }
    etcd_ = new TempEtcd();
    cluster::EtcdClusterOptions::Tls tls;
    tls.ca_file = Good("ca.pem");
    tls.cert_file = Good("member-127.0.0.1.pem");
    tls.key_file = Good("member-127.0.0.1-key.pem");
    absl::Status started = etcd_->Start(tls);
    ASSERT_TRUE(started.ok()) << started;
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
    if (certs_ != nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(*certs_, ignored);
    }
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(nullptr, etcd_); }

  static std::string Good(const std::string& name) { return *certs_ + "/good/" + name; }
  static std::string Rogue(const std::string& name) { return *certs_ + "/rogue/" + name; }
  static EtcdTlsFiles GoodFiles() { return {Good("ca.pem"), Good("meta.pem"), Good("meta-key.pem")}; }
  static std::vector<std::string> Endpoints() { return (*etcd_)->endpoints(); }

  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(std::vector<std::string> endpoints,
                                                             EtcdTlsFiles tls) {
    EtcdClientOptions options;
    options.endpoints = std::move(endpoints);
    options.call_timeout = kCallTimeout;
    options.tls = std::move(tls);
    return EtcdClient::Connect(std::move(options));
  }

  static std::string* certs_;
  static TempEtcd* etcd_;
};

std::string* EtcdTlsTest::certs_ = nullptr;
TempEtcd* EtcdTlsTest::etcd_ = nullptr;

TEST_F(EtcdTlsTest, TheClusterCertificateReadsAndWritesOthersAreRefused) {
  auto client = Connect(Endpoints(), GoodFiles());
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Put("/tls-test/k", "over TLS").ok());
  auto got = (*client)->Range("/tls-test/k");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(1u, got->size());
  EXPECT_EQ("over TLS", (*got)[0].value);

  struct Refused {
    const char* what;
    std::vector<std::string> endpoints;
    EtcdTlsFiles tls;
  };
  std::vector<std::string> by_name;
  for (const std::string& e : Endpoints()) {
    by_name.push_back(absl::StrReplaceAll(e, {{"127.0.0.1", "localhost"}}));
  }
  const std::vector<Refused> refused = {
      {"a client certificate of another CA", Endpoints(),
       {Good("ca.pem"), Rogue("meta.pem"), Rogue("meta-key.pem")}},
      {"no client certificate", Endpoints(), {Good("ca.pem"), "", ""}},
      {"trusting another CA", Endpoints(), {Rogue("ca.pem"), Good("meta.pem"), Good("meta-key.pem")}},
      {"a host the member certificates do not name", by_name, GoodFiles()},
      {"no TLS", Endpoints(), {}},
  };
  for (const Refused& r : refused) {
    auto c = Connect(r.endpoints, r.tls);
    EXPECT_FALSE(c.ok()) << r.what << ": connected";
    if (c.ok()) continue;
    EXPECT_EQ(absl::StatusCode::kUnavailable, c.status().code()) << r.what << ": " << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), "no endpoint of")) << c.status();
  }
}

TEST_F(EtcdTlsTest, BadFilesAreClearErrors) {
  auto missing = Connect(Endpoints(), {"/nonexistent/ca.pem", "", ""});
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, missing.status().code());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "--etcd_ca_file '/nonexistent/ca.pem'"))
      << missing.status();
  auto not_pem = Connect(Endpoints(), {"/etc/hostname", "", ""});
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, not_pem.status().code());
  EXPECT_TRUE(absl::StrContains(not_pem.status().message(), "holds no PEM block")) << not_pem.status();
  auto half = Connect(Endpoints(), {Good("ca.pem"), Good("meta.pem"), ""});
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, half.status().code()) << half.status();
  auto cert_without_ca = Connect(Endpoints(), {"", Good("meta.pem"), Good("meta-key.pem")});
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, cert_without_ca.status().code())
      << cert_without_ca.status();
}

TEST_F(EtcdTlsTest, MetaReplicasOverTlsServeAMountAndAWrongCertificateIsRefused) {
  MountedClusterOptions options;
  options.etcd_endpoints = Endpoints();
  options.meta_replicas = 3;
  options.meta_flags = {"--etcd_ca_file=" + Good("ca.pem"), "--etcd_cert_file=" + Good("meta.pem"),
                        "--etcd_key_file=" + Good("meta-key.pem")};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("over-tls");
  ASSERT_TRUE(WriteFile(path, "namespace in etcd over TLS").ok());
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ("namespace in etcd over TLS", *data);

  // A fourth replica of the same cluster with another CA's certificate:
  // etcd refuses its handshake, and it exits with an error naming etcd.
  const std::string dir = (*mc)->root() + "/rogue-meta";
  CommandResult rogue = RunCommand(absl::StrCat(
      "timeout 60 ", LogfsBinary(), " meta --data_dir=", dir, " --listen=127.0.0.1:0",
      " --etcd=", absl::StrJoin(Endpoints(), ","), " --cluster=test",
      " --etcd_ca_file=", Good("ca.pem"), " --etcd_cert_file=", Rogue("meta.pem"),
      " --etcd_key_file=", Rogue("meta-key.pem"), " 2>&1"));
  EXPECT_NE(0, rogue.exit_code) << rogue.output;
  EXPECT_NE(124, rogue.exit_code) << "it must give up by itself: " << rogue.output;
  EXPECT_TRUE(absl::StrContains(rogue.output, "etcd: no endpoint of")) << rogue.output;
  EXPECT_TRUE(absl::StrContains(rogue.output, "TLS")) << rogue.output;

  // The served replicas are untouched: the mount still reads.
  data = ReadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ("namespace in etcd over TLS", *data);
}

}  // namespace
}  // namespace logfs::testing
