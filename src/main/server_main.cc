// `logfs meta` and `logfs segd`: run a server until SIGTERM / SIGINT.
#include <dirent.h>
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/xattr.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "src/env/posix_file.h"
#include "src/env/secret_file.h"
#include "src/env/sync_delay_file_system.h"
#include "src/main/flag_validators.h"
#include "src/main/metrics_flags.h"
#include "src/main/subcommands.h"
#include "store/client/meta_endpoints.h"
#include "store/format/wire_version.h"
#include "store/format/xattr_names.h"
#include "store/meta/meta_server.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/io_threads.h"
#include "store/segd/segd_metrics.h"
#include "store/segd/segment_server.h"

DEFINE_string(data_dir, "",
              "meta and segd: directory for the server's state (required); mount: the embedded "
              "cluster's (default $XDG_DATA_HOME/logfs or ~/.local/share/logfs)");
DEFINE_string(listen, "127.0.0.1:0", "host:port to listen on (port 0 picks a free port)");
DEFINE_string(advertise, "",
              "meta and segd: host[:port] others dial (what meta registers and hands to "
              "mounts); default: the --listen address, which must then not be a wildcard such "
              "as 0.0.0.0; without a port (or with port 0): the bound port");
DEFINE_string(address_file, "", "if set, write the advertised host:port here once serving");
DEFINE_string(meta, "",
              "host:port of the meta server (segd: required, or a comma-separated list of every "
              "meta replica, all heartbeated, registered with the active; mount: none = "
              "embedded; bench wal: append through the client library, no FUSE)");
DEFINE_int32(io_threads, 1,
             "network threads per process (with more, the thread that polls hands each "
             "request to another: a wake-up per request on small machines)");
DEFINE_int32(meta_handler_threads, 32,
             "meta: threads that serve namespace calls; a change waits on one for its group "
             "commit, so this bounds the changes one group can hold");
DEFINE_int32(cache_lease_ms, 1000,
             "meta: a mount trusts the names and attributes its kernel cached this long after "
             "meta last answered its cache poll, and a change waits at most this (plus a margin) "
             "for a mount that does not drop what it made stale (docs/coherence.md); 0: no "
             "invalidations, mounts keep names and attributes 1 s");
DEFINE_int32(sync_interval_ms, 5, "segd: longest time an appended byte waits for fdatasync");
DEFINE_uint64(journal_bytes, 64u << 20,
              "segd: bytes of the journal file that group-commits appends (zero-filled once; "
              ">= 1 MiB)");
DEFINE_int32(heartbeat_interval_ms, 1000, "segd: interval of heartbeats to meta");
DEFINE_int32(register_wait_ms, 60000,
             "segd: how long the first registration waits for an active meta before the "
             "server gives up (ms, >= 0; 0: one round)");
DEFINE_string(host_id, "",
              "segd and mount: this host's id for short-circuit reads, which a mount uses only "
              "for servers with the same id (default: the kernel's boot id; set one per network "
              "namespace when namespaces of one kernel stand in for hosts)");
DEFINE_string(failure_domain, "",
              "segd: where this server sits, outermost first, e.g. rack1/host3; placement puts "
              "a segment's replicas in distinct domains at the highest level that has enough "
              "(default: the host name)");
DEFINE_string(short_circuit_socket, "",
              "segd: Unix socket that hands sealed replicas to readers on this host "
              "(short-circuit reads; default DATA_DIR/segd.sock; 'off' disables them)");
DEFINE_string(rpc_socket, "",
              "segd: Unix stream socket that serves the same RPCs as --listen (same frames and "
              "authentication), which mounts on this host use instead of loopback TCP (default "
              "DATA_DIR/segd-rpc.sock; mode 0600; 'off': TCP only)");
DEFINE_string(cluster_secret_file, "",
              "every subcommand that talks to meta or segd: file holding the cluster's shared "
              "secret (at least 32 bytes, e.g. openssl rand -hex 32; mode 0600 or stricter): "
              "every connection is authenticated and every frame carries a MAC; all processes "
              "of a cluster need the same one (default none; the embedded cluster makes one "
              "in its data dir)");
DEFINE_string(short_circuit_uids, "",
              "segd: comma-separated uids besides root and segd's own that may open replicas "
              "through the short-circuit socket (SO_PEERCRED)");
DEFINE_int32(dead_server_ms, 10000, "meta: a segment server silent this long is dead");
DEFINE_string(etcd, "",
              "meta: host:port[,host:port...] of etcd members; run as one replica of an elected, "
              "replicated meta (docs/meta_ha.md). Empty: a lone meta");
DEFINE_string(etcd_ca_file, "",
              "meta with --etcd: PEM file of the CA that signed the etcd members' certificates; "
              "set, every connection to etcd is TLS (https:// endpoints)");
DEFINE_string(etcd_cert_file, "",
              "meta with --etcd_ca_file: PEM file of this meta's client certificate, for etcd's "
              "--client-cert-auth");
DEFINE_string(etcd_key_file, "",
              "meta with --etcd_cert_file: PEM file of that certificate's private key (keep it "
              "mode 0600)");
DEFINE_string(cluster, "",
              "meta with --etcd: the cluster's name (its etcd keys: /logfs/NAME/meta/)");
DEFINE_int64(meta_lease_ttl_ms, 5000,
             "meta with --etcd: TTL of a replica's etcd lease; the active stops answering when "
             "it could not renew it for half of this");
DEFINE_int64(meta_poll_interval_ms, 100, "meta with --etcd: how often a standby reads the journal");
DEFINE_uint64(meta_journal_keep_records, 50000,
              "meta with --etcd: journal records never trimmed (for replicas that were down)");
DEFINE_int64(meta_journal_trim_interval_ms, 10000,
             "meta with --etcd: how often the active trims the journal");
DEFINE_int32(lease_timeout_ms, 60000, "meta: a writer lease lapses without mount heartbeats");
DEFINE_int32(lease_recovery_delay_ms, 5000,
             "meta: a file whose writer's lease lapsed (its mount died or went silent) is "
             "recovered and sealed by meta this long after, unless it is opened for write again");
DEFINE_int32(rpc_timeout_ms, 5000, "deadline of one call to another server");
DEFINE_string(TEST_wire_versions, "",
              "tests: MIN:MAX, the wire versions this process states instead of its own "
              "(store/format/wire_version.h), to see a refusal without an old build");
DEFINE_int32(TEST_exit_before_reply_to_change, 0,
             "meta, tests only: exit right after handling the Nth namespace change that "
             "carries a call id, before replying (0: never)");
DEFINE_string(TEST_sync_delay_ms, "",
              "segd, tests only: make every fdatasync of the server wait a random MIN-MAX ms "
              "first (e.g. 20-50), a slow disk for the fault suite (empty: off)");
DEFINE_string(TEST_sync_delay_switch, "",
              "segd, tests only: with --TEST_sync_delay_ms, delay only while this file exists "
              "(a relative path is in --data_dir)");
DEFINE_uint64(server_id, 0,
              "segd: take this server id when the data dir has none (an empty, replaced disk "
              "restarted as the server it replaces; meta copies its replicas back)");
DEFINE_int64(replica_report_interval_ms, 600000,
             "meta: how often each segment server reports the replicas it holds (also at its "
             "start and meta's)");
DEFINE_int64(stray_replica_grace_ms, 300000,
             "meta: a replica no file lists is deleted once unchanged this long");

namespace logfs::main {
namespace {

DEFINE_validator(io_threads, (&AtLeast<int32_t, 1>));
DEFINE_validator(meta_handler_threads, (&AtLeast<int32_t, 1>));
DEFINE_validator(cache_lease_ms, (&AtLeast<int32_t, 0>));
DEFINE_validator(sync_interval_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(journal_bytes, (&AtLeast<uint64_t, (1 << 20)>));
DEFINE_validator(heartbeat_interval_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(register_wait_ms, (&AtLeast<int32_t, 0>));
DEFINE_validator(dead_server_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(meta_lease_ttl_ms, (&AtLeast<int64_t, 1000>));
DEFINE_validator(meta_poll_interval_ms, (&AtLeast<int64_t, 1>));
DEFINE_validator(meta_journal_trim_interval_ms, (&AtLeast<int64_t, 1>));
DEFINE_validator(lease_timeout_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(lease_recovery_delay_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(rpc_timeout_ms, (&AtLeast<int32_t, 1>));
DEFINE_validator(replica_report_interval_ms, (&AtLeast<int64_t, 1>));
DEFINE_validator(stray_replica_grace_ms, (&AtLeast<int64_t, 0>));

// Blocks SIGTERM/SIGINT in every thread (call before starting threads) so
// that WaitForTermination can take them with sigwait.
sigset_t BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "logfs %s: %s\n", what, std::string(status.message()).c_str());
  // A version refusal holds until one side is upgraded: the units do not
  // restart on it (RestartPreventExitStatus).
  return format::IsVersionRefusal(status) ? format::kExitVersionRefused : 1;
}

// Serves until a termination signal, then stops `server`. Under systemd
// (Type=notify, $NOTIFY_SOCKET set) it sends READY=1 once the server is
// serving (Start returned: listening, state open) and STOPPING=1 when the
// signal comes; without $NOTIFY_SOCKET sd_notify does nothing.
template <typename Server>
int Serve(const char* what, Server& server, const sigset_t& signals, rpc::IoThreads& threads) {
  if (!FLAGS_address_file.empty()) {
    absl::Status s = env::WriteFileAtomically(FLAGS_address_file, server.advertised_address());
    if (!s.ok()) return Fail(what, s);
  }
  LOG(INFO) << "logfs " << what << " serving on " << server.bound_address() << ", advertised as "
            << server.advertised_address();
  // A failed notification is systemd's to notice (the start times out); it
  // does not stop a server that serves.
  if (int r = sd_notify(0, "READY=1"); r < 0) LOG(WARNING) << "sd_notify READY=1: " << strerror(-r);
  int sig = 0;
  sigwait(&signals, &sig);
  LOG(INFO) << "logfs " << what << " stopping on signal " << sig;
  sd_notify(0, "STOPPING=1");
  server.Stop();
  threads.Join();
  return 0;
}

// A meta replica that must stop serving starts again as a standby: the
// same binary and arguments, every descriptor closed (the listening
// socket, RocksDB's lock), as if restarted by its supervisor but without
// waiting for one.
[[noreturn]] void ReExecMeta(const std::vector<std::string>& args, const std::string& why) {
  LOG(ERROR) << "meta restarts (a replica as a standby): " << why;
  google::FlushLogFiles(google::GLOG_INFO);
  if (DIR* fds = opendir("/proc/self/fd"); fds != nullptr) {
    const int own = dirfd(fds);
    while (struct dirent* entry = readdir(fds)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != own) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    closedir(fds);
  }
  std::vector<std::string> strings = {"/proc/self/exe", "meta"};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> exec_argv;
  for (std::string& s : strings) exec_argv.push_back(s.data());
  exec_argv.push_back(nullptr);
  execv("/proc/self/exe", exec_argv.data());
  PLOG(FATAL) << "re-executing meta";  // exits: a supervisor restarts it
  std::abort();
}

bool RequireDataDir(const char* what) {
  if (!FLAGS_data_dir.empty()) return true;
  std::fprintf(stderr, "logfs %s: --data_dir is required\n", what);
  return false;
}

// --listen and --advertise checked as the server checks them once bound
// (rpc::AdvertisedAddress), but before it creates anything in its data
// dir: a mistyped address leaves no RocksDB or journal behind.
bool RequireServerAddresses(const char* what) {
  auto listen = rpc::ParseEndpoint(FLAGS_listen);
  absl::Status status = listen.status();
  if (listen.ok()) {
    status = rpc::AdvertisedAddress(FLAGS_listen, rpc::FormatEndpoint(*listen), FLAGS_advertise)
                 .status();
  }
  if (status.ok()) return true;
  Fail(what, status);
  return false;
}

}  // namespace

int MetaMain(int argc, char** argv) {
  if (IsMetaAdminCommand(argc, argv)) return MetaAdminMain(argc, argv);
  constexpr char kUsage[] =
      "logfs meta --data_dir=DIR --listen=HOST:PORT [--etcd=HOST:PORT,... --cluster=NAME]\n"
      "   or: logfs meta backup|bootstrap ... (see 'logfs meta backup --help')";
  // As given, for a replica that steps down and starts again as a standby.
  const std::vector<std::string> args(argv + 1, argv + argc);
  InitProcess(&argc, &argv, kUsage,
              {{"meta:"},
               {"data_dir", "listen", "advertise", "address_file", "io_threads",
                "meta_handler_threads", "rpc_timeout_ms", "etcd", "etcd_ca_file", "etcd_cert_file",
                "etcd_key_file", "cluster", "metrics_listen",
                "metrics_address_file"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 1;
  if (!RequireDataDir("meta")) return 1;
  if (!RequireServerAddresses("meta")) return 1;
  std::vector<std::string> etcd;
  if (!FLAGS_etcd.empty()) {
    auto endpoints = client::MetaEndpoints::ParseList(FLAGS_etcd);
    if (!endpoints.ok()) {
      std::fprintf(stderr, "logfs meta: bad --etcd '%s': want host:port[,host:port...]\n",
                   FLAGS_etcd.c_str());
      return 1;
    }
    etcd = std::move(*endpoints);
    if (FLAGS_cluster.empty() || FLAGS_cluster.find('/') != std::string::npos) {
      std::fprintf(stderr, "logfs meta: --etcd needs --cluster=NAME (no '/' in NAME)\n");
      return 1;
    }
  } else if (!FLAGS_cluster.empty()) {
    std::fprintf(stderr, "logfs meta: --cluster is only for replicas (with --etcd)\n");
    return 1;
  }
  if (FLAGS_etcd.empty() &&
      !(FLAGS_etcd_ca_file.empty() && FLAGS_etcd_cert_file.empty() && FLAGS_etcd_key_file.empty())) {
    std::fprintf(stderr,
                 "logfs meta: --etcd_ca_file, --etcd_cert_file and --etcd_key_file are only for "
                 "replicas (with --etcd)\n");
    return 1;
  }
  sigset_t signals = BlockTerminationSignals();
  rpc::IoThreads threads(FLAGS_io_threads);
  meta::MetaServerOptions options;
  options.data_dir = FLAGS_data_dir;
  options.listen_address = FLAGS_listen;
  options.advertise_address = FLAGS_advertise;
  options.dead_server_ms = FLAGS_dead_server_ms;
  options.lease_timeout_ms = FLAGS_lease_timeout_ms;
  options.lease_recovery_delay_ms = FLAGS_lease_recovery_delay_ms;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  options.handler_threads = FLAGS_meta_handler_threads;
  options.cache_lease_ms = FLAGS_cache_lease_ms;
  options.TEST_exit_before_reply_to_change = FLAGS_TEST_exit_before_reply_to_change;
  options.replica_report_interval_ms = FLAGS_replica_report_interval_ms;
  options.stray_replica_grace_ms = FLAGS_stray_replica_grace_ms;
  options.etcd_endpoints = std::move(etcd);
  options.etcd_tls = {FLAGS_etcd_ca_file, FLAGS_etcd_cert_file, FLAGS_etcd_key_file};
  options.cluster = FLAGS_cluster;
  options.meta_lease_ttl_ms = FLAGS_meta_lease_ttl_ms;
  options.meta_poll_interval_ms = FLAGS_meta_poll_interval_ms;
  options.journal_keep_records = FLAGS_meta_journal_keep_records;
  options.journal_trim_interval_ms = FLAGS_meta_journal_trim_interval_ms;
  // The replica comes back on the port it has now, also when --listen
  // asked for any (port 0): clients and segment servers know that one.
  auto bound = std::make_shared<absl::Mutex>();
  auto listen = std::make_shared<std::string>();
  options.step_down = [args, bound, listen](const std::string& why) {
    std::vector<std::string> again = args;
    absl::MutexLock lock(bound.get());
    if (!listen->empty()) again.push_back("--listen=" + *listen);
    ReExecMeta(again, why);
  };
  auto server = meta::MetaServer::Start(options, threads.io());
  if (server.ok()) {
    absl::MutexLock lock(bound.get());
    *listen = (*server)->bound_address();
  }
  if (!server.ok()) return Fail("meta", server.status());
  auto metrics = StartMetricsServer(
      "meta", [s = server->get()](metrics::FamilyList& out) { s->CollectMetrics(out); });
  if (!metrics.ok()) return Fail("meta", metrics.status());
  return Serve("meta", **server, signals, threads);
}

int SegdMain(int argc, char** argv) {
  constexpr char kUsage[] = "logfs segd --data_dir=DIR --listen=HOST:PORT --meta=HOST:PORT";
  InitProcess(&argc, &argv, kUsage,
              {{"segd:"},
               {"data_dir", "listen", "advertise", "address_file", "meta", "io_threads",
                "rpc_timeout_ms", "host_id", "metrics_listen", "metrics_address_file"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 1;
  if (!RequireDataDir("segd")) return 1;
  if (FLAGS_meta.empty()) {
    std::fprintf(stderr, "logfs segd: --meta is required\n");
    return 1;
  }
  if (!RequireServerAddresses("segd")) return 1;
  sigset_t signals = BlockTerminationSignals();
  rpc::IoThreads threads(FLAGS_io_threads);
  segd::SegmentServerOptions options;
  options.data_dir = FLAGS_data_dir;
  options.listen_address = FLAGS_listen;
  options.advertise_address = FLAGS_advertise;
  options.failure_domain = FLAGS_failure_domain;
  options.host_id = FLAGS_host_id;
  options.meta_address = FLAGS_meta;
  options.sync_interval_ms = FLAGS_sync_interval_ms;
  options.journal_bytes = FLAGS_journal_bytes;
  options.heartbeat_interval_ms = FLAGS_heartbeat_interval_ms;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  options.register_wait = absl::Milliseconds(FLAGS_register_wait_ms);
  // SIGTERM and SIGINT are blocked until the server serves: a stop asked
  // for while it waits for meta is seen pending.
  options.register_cancelled = [] {
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  };
  options.server_id = FLAGS_server_id;
  if (!FLAGS_TEST_sync_delay_ms.empty()) {
    auto delay = env::ParseSyncDelay(FLAGS_TEST_sync_delay_ms);
    if (!delay.ok()) return Fail("segd", delay.status());
    const std::string& when = FLAGS_TEST_sync_delay_switch;
    delay->only_while = when.empty() || when[0] == '/' ? when : FLAGS_data_dir + "/" + when;
    // Lives as long as the process: the server's files point to it.
    options.file_system = new env::SyncDelayFileSystem(env::FileSystem::Default(), *delay);
    LOG(WARNING) << "--TEST_sync_delay_ms=" << FLAGS_TEST_sync_delay_ms
                 << ": every fdatasync is delayed (a test's slow disk)";
  }
  if (FLAGS_short_circuit_socket != "off") {
    options.short_circuit_socket = FLAGS_short_circuit_socket;
    if (options.short_circuit_socket.empty()) {
      // Absolute: clients are told this path.
      std::error_code error;
      std::filesystem::path dir = std::filesystem::absolute(FLAGS_data_dir, error);
      options.short_circuit_socket = (error ? FLAGS_data_dir : dir.string()) + "/segd.sock";
    }
  }
  if (FLAGS_rpc_socket != "off") {
    options.rpc_socket = FLAGS_rpc_socket;
    if (options.rpc_socket.empty()) {
      // Absolute: clients are told this path.
      std::error_code error;
      std::filesystem::path dir = std::filesystem::absolute(FLAGS_data_dir, error);
      options.rpc_socket = (error ? FLAGS_data_dir : dir.string()) + "/segd-rpc.sock";
    }
  }
  for (absl::string_view uid : absl::StrSplit(FLAGS_short_circuit_uids, ',', absl::SkipEmpty())) {
    uint32_t value;
    if (!absl::SimpleAtoi(uid, &value)) {
      std::fprintf(stderr, "logfs segd: --short_circuit_uids: '%s' is not a uid\n",
                   std::string(uid).c_str());
      return 1;
    }
    options.short_circuit_uids.push_back(value);
  }
  // /metrics comes first, so a server waiting for meta is seen waiting
  // (logfs_segd_registered 0); scrapes read the server once Start returned.
  std::atomic<const segd::SegmentServer*> serving{nullptr};
  auto metrics = StartMetricsServer("segd", [&serving](metrics::FamilyList& out) {
    const segd::SegmentServer* s = serving.load(std::memory_order_acquire);
    if (s == nullptr) return segd::CollectStartingSegdMetrics(out);
    s->CollectMetrics(out);
  });
  if (!metrics.ok()) return Fail("segd", metrics.status());
  auto server = segd::SegmentServer::Start(options, threads.io());
  if (absl::IsCancelled(server.status())) {
    LOG(INFO) << "segd: " << server.status().message();  // asked to stop: not a failure
    return 0;
  }
  if (!server.ok()) return Fail("segd", server.status());
  serving.store(server->get(), std::memory_order_release);
  const int rc = Serve("segd", **server, signals, threads);
  metrics->reset();  // no scrape runs once it is gone, before the server goes
  return rc;
}

void PrintHelpFlags(const HelpFlags& help) {
  std::printf("flags:\n");
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);  // sorted by name
  for (const auto& flag : flags) {
    if (flag.filename.rfind("src/main/", 0) != 0) continue;  // libraries' flags
    bool listed = std::find(help.shared.begin(), help.shared.end(), flag.name) != help.shared.end();
    listed = listed || flag.name == "cluster_secret_file";
    for (const auto& prefix : help.prefixes) {
      listed = listed || flag.description.rfind(prefix, 0) == 0;
    }
    if (!listed) continue;
    std::printf("  --%s=%s\n      %s\n", flag.name.c_str(),
                flag.default_value.empty() ? "\"\"" : flag.default_value.c_str(),
                flag.description.c_str());
  }
}

namespace {

// Prints `usage` and the flags `help` selects, with their defaults.
void PrintHelp(const char* usage, const HelpFlags& help) {
  std::printf("usage: %s\n\n", usage);
  PrintHelpFlags(help);
}

}  // namespace

void InitProcess(int* argc, char*** argv, const char* usage, const HelpFlags& help) {
  gflags::SetUsageMessage(usage);
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp((*argv)[i], "--help") == 0 || std::strcmp((*argv)[i], "-h") == 0 ||
        std::strcmp((*argv)[i], "-help") == 0) {
      PrintHelp(usage, help);
      std::exit(0);
    }
  }
  gflags::ParseCommandLineFlags(argc, argv, true);
  // absl::Mutex checks lock order on every acquisition in builds without
  // NDEBUG (a graph lookup per lock: ~1% of a WAL sync's CPU in perf).
  // logfs_test keeps it on; the processes do not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
  if (!FLAGS_TEST_wire_versions.empty()) {
    uint32_t min = 0, max = 0;
    const std::vector<std::string> parts = absl::StrSplit(FLAGS_TEST_wire_versions, ':');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &min) ||
        !absl::SimpleAtoi(parts[1], &max) || min == 0 || max < min) {
      std::fprintf(stderr, "%s: bad --TEST_wire_versions '%s': want MIN:MAX, 0 < MIN <= MAX\n",
                   (*argv)[0], FLAGS_TEST_wire_versions.c_str());
      std::exit(1);
    }
    format::SetWireVersionsForTest(min, max);
  }
  if (!FLAGS_cluster_secret_file.empty()) {
    absl::Status loaded = LoadClusterSecret(FLAGS_cluster_secret_file, (*argv)[0]);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s: %s\n", (*argv)[0], std::string(loaded.message()).c_str());
      std::exit(1);
    }
  }
}

bool AtMostArgs(int argc, char** argv, int max_args, const char* usage) {
  if (argc - 1 <= max_args) return true;
  std::fprintf(stderr, "%s: unexpected argument '%s'\nusage: %s\n", argv[0], argv[max_args + 1],
               usage);
  return false;
}

void LoadTheMountsSecret(const std::string& path, const std::string& program) {
  if (!FLAGS_cluster_secret_file.empty() || path.empty()) return;
  char secret_path[4096];
  const ssize_t n =
      getxattr(path.c_str(), format::kClusterSecretFileXattr, secret_path, sizeof(secret_path));
  if (n <= 0) return;  // not a logfs mount, or one without a secret
  const std::string secret_file(secret_path, static_cast<size_t>(n));
  absl::Status loaded = LoadClusterSecret(secret_file, program);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: the mount's cluster secret %s: %s (give --cluster_secret_file)\n",
                 program.c_str(), secret_file.c_str(), std::string(loaded.message()).c_str());
  }
}

std::string MetaOfMount(const std::string& path) {
  char buf[256] = {0};
  const ssize_t n = getxattr(path.c_str(), format::kMetaAddressXattr, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

absl::Status LoadClusterSecret(const std::string& path, const std::string& program) {
  // "logfs segd" -> "segd@host": who this process is, in peers' logs.
  auto key = rpc::ClusterKey::FromFile(path, program);
  if (!key.ok()) return key.status();
  rpc::SetProcessClusterKey(std::move(*key));
  return absl::OkStatus();
}

}  // namespace logfs::main
