// `logfs mount [--meta=HOST:PORT] [-f] MNT` and `logfs umount MNT`.
//
// Without --meta the mount brings up the embedded default cluster (one
// meta and three segd processes under --data_dir) and stops it after
// unmount. Without -f it returns once the mount is ready, with exit status
// 0, or 1 and a one-line reason.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/block_trace.h"
#include "fsclient/client.h"
#include "fuse/op_metrics.h"
#include "fuse/session.h"
#include "src/cluster/local_cluster.h"
#include "src/cluster/process.h"
#include "src/env/posix_file.h"
#include "src/main/flag_validators.h"
#include "src/main/metrics_flags.h"
#include "src/main/mount_handoff.h"
#include "src/main/subcommands.h"
#include "src/status/macros.h"
#include "store/format/wire_version.h"
#include "store/format/xattr_names.h"

DECLARE_string(meta);
DECLARE_string(cluster_secret_file);  // src/main/server_main.cc
DECLARE_string(data_dir);
DECLARE_int32(rpc_timeout_ms);
DECLARE_int32(io_threads);
DECLARE_string(host_id);
DEFINE_bool(f, false, "mount: stay in the foreground");
DEFINE_bool(fuse_debug, false, "mount: print every FUSE request (libfuse -d)");
DEFINE_int32(fuse_threads, 16, "mount: FUSE worker threads");
DEFINE_uint64(wal_segment_bytes, 64ull << 20,
              "mount: WAL segment size before roll (bytes, at least 4096)");
DEFINE_uint64(block_segment_bytes, 256ull << 20,
              "mount: block segment size before roll (bytes, at least 4096)");
DEFINE_int32(replica_timeout_ms, 10000, "mount: deadline of one replica call (ms, > 0)");
DEFINE_int32(fsync_timeout_ms, 30000,
             "mount: longest wait for the ack quorum (ms, > 0): a sync not durable on it in "
             "this time fails with EIO");
// A segment must hold something: 0 rolled forever (the writer refuses it
// too), and a few bytes would make a roll, a meta call and replica files
// per write. 4096: one page. A timeout of 0 would fail every sync that is
// not durable the instant it is asked (EIO, sticky), so it is refused.
DEFINE_validator(wal_segment_bytes, (&logfs::main::AtLeast<uint64_t, 4096>));
DEFINE_validator(block_segment_bytes, (&logfs::main::AtLeast<uint64_t, 4096>));
DEFINE_validator(replica_timeout_ms, (&logfs::main::AtLeast<int32_t, 1>));
DEFINE_validator(fsync_timeout_ms, (&logfs::main::AtLeast<int32_t, 1>));
DEFINE_int32(slow_replica_ms, 20,
             "mount: a WAL replica whose acks trail the ack quorum's by more than this, 4 times "
             "within 2 s and twice as often as another replica's, is rolled away from, and "
             "its server avoided by the mount's new segments for 10 minutes (0: off)");
DEFINE_validator(slow_replica_ms, (&logfs::main::AtLeast<int32_t, 0>));
DEFINE_int32(wal_coalesce_us, 1000,
             "mount: a WAL file written without fsync (32 writes since its last) has its "
             "writes held up to this long, or until --wal_coalesce_bytes are there or an "
             "fsync asks, and sent to the replicas as one append (0: each write at once)");
DEFINE_validator(wal_coalesce_us, (&logfs::main::AtLeast<int32_t, 0>));
DEFINE_uint64(wal_coalesce_bytes, 128u << 10,
              "mount: the most bytes of unsynced WAL writes held for one append (see "
              "--wal_coalesce_us)");
DEFINE_validator(wal_coalesce_bytes, (&logfs::main::AtLeast<uint64_t, 1>));
DEFINE_int32(meta_retry_ms, 30000,
             "mount: how long a meta call whose connection fails (meta restarting or "
             "unreachable) is retried before it fails with EIO (0: at once)");
DEFINE_validator(meta_retry_ms, (&logfs::main::AtLeast<int32_t, 0>));
DEFINE_int32(mount_wait_ms, 60000,
             "mount: at start, how long to keep trying to reach meta (down, starting, or no "
             "active replica), with backoff and a log line per retry, before failing (ms; 0: "
             "fail at the first refusal)");
DEFINE_validator(mount_wait_ms, (&logfs::main::AtLeast<int32_t, 0>));
DEFINE_bool(allow_other, false,
            "mount: let other users use the mount (always on as root; other users need "
            "user_allow_other in /etc/fuse.conf)");
DEFINE_bool(read_only, false, "mount: mount read-only: the kernel fails writes with EROFS");
DEFINE_string(fsname, "logfs",
              "mount: the source shown in /proc/mounts (mount.fuse.logfs sets it to SRC)");
DEFINE_bool(takeover, false,
            "mount: take the mount at MOUNTPOINT over from the daemon serving it on this host, "
            "without unmounting: open files and requests carry on (docs/OPERATIONS.md "
            "\"Restarting a mount\"); needs --meta");
DEFINE_string(handoff_on_sigterm, "auto",
              "mount: under systemd, what SIGTERM does: 'auto' hands the mount to the next "
              "instance through systemd's fd store when the unit is being restarted (asked over "
              "D-Bus), else unmounts; 'always' hands it over on every SIGTERM; 'never' unmounts");
DEFINE_validator(handoff_on_sigterm, [](const char*, const std::string& v) {
  if (v == "auto" || v == "always" || v == "never") return true;
  std::fprintf(stderr, "logfs: --handoff_on_sigterm must be auto, always or never, not %s\n",
               v.c_str());
  return false;
});
DEFINE_int32(segment_servers, 3, "embedded cluster: number of segment servers");
DEFINE_string(log_file, "",
              "mount: daemon log (default: DATA_DIR/mount.log embedded; else the journal when "
              "journald runs, as `journalctl -t logfs-mount`; else /tmp/logfs-mount.log)");
DEFINE_int32(umount_timeout_ms, 30000, "umount: how long to wait for the daemon to exit");
DEFINE_uint64(block_cache_bytes, 256ull << 20,
              "mount: block cache of sealed data (bytes; 0 disables it)");
DEFINE_uint32(block_cache_block_bytes, 64u << 10,
              "mount: block cache block size (bytes; a multiple of 16384, at most 4 MiB)");
DEFINE_string(block_cache_trace, "",
              "mount: record the key of every block-cache lookup to this file (16 bytes each, "
              "at most 64 Mi lookups) for `logfs bench cache-replay`; a diagnostic, off by default");
DEFINE_bool(continue_wal_segments, true,
            "mount: a WAL file reopened for append continues its last segment while that is "
            "shorter than --wal_segment_bytes and all its replicas are healthy, instead of "
            "starting a new one (off: every writer starts a segment)");
DEFINE_double(cache_timeout_s, 60,
              "mount: how long the kernel keeps names (missing ones too) and the attributes of "
              "sealed files and directories while meta invalidates them (docs/coherence.md)");
DEFINE_int32(cache_entries_max, 65536,
             "mount: names and inodes the kernel is given --cache_timeout_s for; past it the "
             "oldest are dropped from the kernel");
DEFINE_validator(cache_entries_max, (&logfs::main::AtLeast<int32_t, 1>));
static bool ValidCacheTimeout(const char* flag, double seconds) {
  if (seconds >= 0 && seconds <= 86400) return true;
  std::fprintf(stderr, "--%s must be between 0 and 86400 seconds, got %g\n", flag, seconds);
  return false;
}
DEFINE_validator(cache_timeout_s, &ValidCacheTimeout);
DEFINE_bool(short_circuit, true,
            "mount: read sealed replicas on this host straight from their files (descriptors "
            "from the segment server's Unix socket) instead of over TCP");
DEFINE_string(local_transport, "unix",
              "mount: how to reach segment servers on this host: 'unix' over their RPC Unix "
              "socket (segd --rpc_socket; TCP if it cannot connect), 'tcp' over loopback TCP");
DEFINE_validator(local_transport, [](const char*, const std::string& v) {
  if (v == "unix" || v == "tcp") return true;
  std::fprintf(stderr, "logfs: --local_transport must be unix or tcp, not %s\n", v.c_str());
  return false;
});
DEFINE_uint32(replica_cache_size, 128,
              "mount: unreferenced short-circuit replicas kept open (2 descriptors each; 0: "
              "closed as soon as no read uses them)");
DEFINE_int32(replica_cache_expiry_ms, 300000,
             "mount: how long an unreferenced short-circuit replica stays open (ms, > 0)");
DEFINE_bool(replica_cache_mmap, true,
            "mount: read short-circuit replicas through a read-only mapping of their files "
            "(a block-cache fill copies once); off: pread");
DEFINE_uint32(replica_cache_mmap_size, 64,
              "mount: unreferenced short-circuit replicas kept mapped (past it the oldest is "
              "unmapped and stays open for --replica_cache_expiry_ms)");
DEFINE_uint64(replica_cache_mmap_bytes, uint64_t{4} << 30,
              "mount: bytes of unreferenced short-circuit replicas kept mapped");
DEFINE_int32(replica_cache_mmap_expiry_ms, 60000,
             "mount: how long an unreferenced short-circuit replica stays mapped (ms, > 0)");
// gflags says only "failed validation"; these say why.
DEFINE_validator(replica_cache_expiry_ms, (&logfs::main::AtLeast<int32_t, 1>));
DEFINE_validator(replica_cache_mmap_expiry_ms, (&logfs::main::AtLeast<int32_t, 1>));
DEFINE_validator(block_cache_block_bytes, [](const char*, uint32_t v) {
  if (v > 0 && v % logfs::cache::ChunkPool::kChunkBytes == 0 && v <= (4u << 20)) return true;
  std::fprintf(stderr, "logfs: --block_cache_block_bytes must be a positive multiple of 16384, "
                       "at most 4194304\n");
  return false;
});

namespace logfs::main {
namespace {

std::string DefaultDataDir() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg != nullptr && *xdg != '\0') return absl::StrCat(xdg, "/logfs");
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "/root", "/.local/share/logfs");
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "logfs";
  buf[n] = '\0';
  return buf;
}

// Reports the daemon's outcome to the waiting parent: "" means ready.
class ReadyPipe {
 public:
  void Report(const std::string& error) {
    if (fd_ < 0) {
      if (!error.empty()) std::fprintf(stderr, "logfs mount: %s\n", error.c_str());
      return;
    }
    std::string msg = error.empty() ? "ok" : error;
    ssize_t ignored = write(fd_, msg.data(), msg.size());
    (void)ignored;
    close(fd_);
    fd_ = -1;
  }
  void set_fd(int fd) { fd_ = fd; }

 private:
  int fd_ = -1;
};

// Forks; the parent waits for the child's report and exits with it.
// Returns in the child only.
void Daemonize(ReadyPipe* ready) {
  int fds[2];
  if (pipe(fds) != 0) {
    std::perror("logfs mount: pipe");
    std::exit(1);
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("logfs mount: fork");
    std::exit(1);
  }
  if (pid > 0) {
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, n);
    if (msg == "ok") std::exit(0);
    std::fprintf(stderr, "logfs mount: %s\n",
                 msg.empty() ? "the mount daemon exited before the mount was ready"
                             : msg.c_str());
    std::exit(1);
  }
  close(fds[0]);
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  ready->set_fd(fds[1]);
  setsid();
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
    if (chdir("/") != 0) {
      // Best effort: the daemon keeps whatever cwd it had.
    }
  }
}

// Points the daemon's stderr (glog's output) at its log: --log_file if
// set; the embedded cluster's log next to its state; else the journal if
// journald runs (identifier logfs-mount), where a service's or a mount
// unit's output would go and where admins look; else /tmp/logfs-mount.log.
// Best effort: a log that cannot be opened leaves stderr as it was.
void RedirectDaemonLog(const std::string& data_dir) {
  int log_fd = -1;
  if (FLAGS_log_file.empty() && FLAGS_meta.empty()) {
    env::MakeDirs(data_dir).IgnoreError();  // the cluster's start says why if it fails
    log_fd =
        open((data_dir + "/mount.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  } else if (FLAGS_log_file.empty()) {
    log_fd = sd_journal_stream_fd("logfs-mount", LOG_INFO, /*level_prefix=*/0);
    if (log_fd < 0) {
      log_fd = open("/tmp/logfs-mount.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
  } else {
    log_fd = open(FLAGS_log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  if (log_fd < 0 || log_fd == STDERR_FILENO) return;
  dup2(log_fd, STDERR_FILENO);
  close(log_fd);
}

// Takes an exclusive lock on the data dir so two embedded mounts never
// share one cluster's state. Returns the fd holding the lock.
absl::StatusOr<int> LockDataDir(const std::string& dir) {
  std::string path = dir + "/lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot open ", path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", dir, " is in use by another logfs mount"));
  }
  return fd;
}

// `path` made absolute against the current directory (the daemon runs in /).
std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

// True if `path` (absolute, resolved) is a mount point in /proc/mounts.
bool IsMounted(const std::string& path) {
  FILE* f = std::fopen("/proc/self/mounts", "r");
  if (f == nullptr) return false;
  char device[4096], dir[4096];
  bool found = false;
  while (std::fscanf(f, "%4095s %4095s %*[^\n]", device, dir) == 2) {
    if (path == dir) found = true;
  }
  std::fclose(f);
  return found;
}

// Runs `fusermount3 ARGS... path`; true if it exited 0.
bool RunFusermount(const std::vector<std::string>& args, const std::string& path) {
  std::vector<std::string> argv = {"/bin/fusermount3"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(path);
  auto pid = cluster::Spawn(argv, "");
  int status = 1;
  if (pid.ok()) waitpid(*pid, &status, 0);
  return pid.ok() && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// `path` as the mount table names it, without looking at `path` itself (a
// dead mount fails every call, and a mount being handed over answers
// none until this daemon serves it): its parent resolved (a mount point's
// parent is not on that mount), its last component kept. "" if the
// parent cannot be resolved.
std::string CanonicalMountPoint(const std::string& path) {
  std::string absolute = Absolute(path);
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  const size_t slash = absolute.rfind('/');
  if (slash == std::string::npos || absolute == "/") return absolute;
  char parent[PATH_MAX];
  const std::string parent_path = slash == 0 ? "/" : absolute.substr(0, slash);
  if (realpath(parent_path.c_str(), parent) == nullptr) return "";
  return absl::StrCat(std::string(parent) == "/" ? "" : parent, absolute.substr(slash));
}

// A FUSE mount whose daemon died answers every call on its mount point with
// ENOTCONN ("Transport endpoint is not connected") until it is unmounted
// (libfuse issue #41): no mount can go there, and even realpath() of it
// fails. If `path` is such a dead mount, detaches it (`fusermount3 -uz`,
// what the libfuse maintainers advise before mounting again) and says so
// on stderr; a live mount, or none, is left alone. This is what lets
// logfs-mount@.service restart a mount whose daemon was killed, and an
// fstab mount be mounted again, without unmounting by hand.
void ClearDeadMount(const std::string& path) {
  // statfs, not stat: the kernel may answer stat of the root from cached
  // attributes, while every statfs reaches the daemon.
  struct statfs fs;
  if (statfs(path.c_str(), &fs) == 0 || errno != ENOTCONN) return;
  // The mount table names it by its canonical path.
  const std::string canonical = CanonicalMountPoint(path);
  if (canonical.empty() || !IsMounted(canonical)) return;
  if (RunFusermount({"-uz"}, canonical)) {
    std::fprintf(stderr, "logfs mount: %s was a dead mount (its daemon had died): detached it\n",
                 canonical.c_str());
  }
}

// The mount's options from its flags, with meta at `meta`.
fsclient::ClientOptions ClientOptionsFromFlags(const std::string& meta) {
  fsclient::ClientOptions options;
  options.meta_address = meta;
  options.wal_segment_bytes = FLAGS_wal_segment_bytes;
  options.continue_wal_segments = FLAGS_continue_wal_segments;
  options.block_segment_bytes = FLAGS_block_segment_bytes;
  options.rpc_timeout = absl::Milliseconds(FLAGS_rpc_timeout_ms);
  options.meta_retry = absl::Milliseconds(FLAGS_meta_retry_ms);
  options.connect_wait = absl::Milliseconds(FLAGS_mount_wait_ms);
  options.replica_timeout = absl::Milliseconds(FLAGS_replica_timeout_ms);
  options.fsync_timeout = absl::Milliseconds(FLAGS_fsync_timeout_ms);
  options.wal_coalesce_delay = absl::Microseconds(FLAGS_wal_coalesce_us);
  options.wal_coalesce_bytes = FLAGS_wal_coalesce_bytes;
  options.slow_replica.slow_lag = absl::Milliseconds(FLAGS_slow_replica_ms);
  options.io_threads = FLAGS_io_threads;
  options.block_cache_bytes = FLAGS_block_cache_bytes;
  options.block_cache_block_bytes = FLAGS_block_cache_block_bytes;
  options.short_circuit = FLAGS_short_circuit;
  options.cache.timeout_seconds = FLAGS_cache_timeout_s;
  options.cache.tracked_max = static_cast<size_t>(FLAGS_cache_entries_max);
  options.host_id = FLAGS_host_id;
  options.local_transport =
      FLAGS_local_transport == "tcp" ? rpc::Transport::kTcp : rpc::Transport::kUnix;
  options.replica_cache.max_evictable = FLAGS_replica_cache_size;
  options.replica_cache.max_idle = absl::Milliseconds(FLAGS_replica_cache_expiry_ms);
  options.replica_cache.mmap = FLAGS_replica_cache_mmap;
  options.replica_cache.max_evictable_mmapped = FLAGS_replica_cache_mmap_size;
  options.replica_cache.max_evictable_mmapped_bytes = FLAGS_replica_cache_mmap_bytes;
  options.replica_cache.max_mmapped_idle = absl::Milliseconds(FLAGS_replica_cache_mmap_expiry_ms);
  return options;
}

// Locks `data_dir` (the descriptor goes to `*lock_fd`) and starts the
// embedded cluster in it.
absl::StatusOr<std::unique_ptr<cluster::LocalCluster>> StartEmbeddedCluster(
    const std::string& data_dir, int* lock_fd) {
  RETURN_IF_ERROR(env::MakeDirs(data_dir));
  ASSIGN_OR_RETURN(*lock_fd, LockDataDir(data_dir));
  cluster::LocalClusterOptions options;
  options.binary = SelfExe();
  options.data_dir = data_dir;
  options.segment_servers = FLAGS_segment_servers;
  // Authenticated as users run it: with the given secret, else one the
  // cluster keeps in its data dir.
  options.authenticate = true;
  options.cluster_secret_file = FLAGS_cluster_secret_file;
  options.meta_flags = ChildMetricsFlags(data_dir + "/meta.metrics_address");
  for (int i = 0; i < options.segment_servers && !options.meta_flags.empty(); ++i) {
    options.segd_hosts.emplace_back();
    options.segd_hosts.back().flags =
        ChildMetricsFlags(absl::StrCat(data_dir, "/segd", i, ".metrics_address"));
  }
  auto started = cluster::LocalCluster::Start(options);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat("embedded cluster: ", started.status().message()));
  }
  return started;
}

SigtermHandoff SigtermHandoffFromFlag() {
  if (FLAGS_handoff_on_sigterm == "always") return SigtermHandoff::kAlways;
  if (FLAGS_handoff_on_sigterm == "never") return SigtermHandoff::kNever;
  return SigtermHandoff::kAuto;
}

int RunMount(const std::string& mountpoint_arg) {
  // A logfs-mount@ being restarted finds its predecessor's mount in
  // systemd's fd store.
  absl::StatusOr<std::unique_ptr<Handover>> stored = HandoverFromFdStore();
  if (!stored.ok()) {
    std::fprintf(stderr, "logfs mount: the mount handed over by systemd: %s\n",
                 std::string(stored.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<Handover> handover = *std::move(stored);
  std::string mountpoint;
  if (handover != nullptr || FLAGS_takeover) {
    if (FLAGS_meta.empty()) {
      std::fprintf(stderr, "logfs mount: --takeover needs --meta (a mount with an embedded "
                           "cluster cannot be handed over)\n");
      return 1;
    }
    mountpoint = CanonicalMountPoint(mountpoint_arg);
    if (mountpoint.empty()) {
      std::fprintf(stderr, "logfs mount: cannot resolve the directory of %s\n",
                   mountpoint_arg.c_str());
      return 1;
    }
  } else {
    ClearDeadMount(mountpoint_arg);
    char resolved[PATH_MAX];
    struct stat st;
    if (realpath(mountpoint_arg.c_str(), resolved) == nullptr ||
        stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
      std::fprintf(stderr, "logfs mount: mount point %s is not a directory\n",
                   mountpoint_arg.c_str());
      return 1;
    }
    mountpoint = resolved;
    if (IsMounted(mountpoint)) {
      std::fprintf(stderr, "logfs mount: %s is already a mount point\n", mountpoint.c_str());
      return 1;
    }
  }
  ReadyPipe ready;
  std::string data_dir = Absolute(FLAGS_data_dir.empty() ? DefaultDataDir() : FLAGS_data_dir);
  FLAGS_log_file = Absolute(FLAGS_log_file);
  FLAGS_cluster_secret_file = Absolute(FLAGS_cluster_secret_file);  // for the embedded cluster too
  FLAGS_block_cache_trace = Absolute(FLAGS_block_cache_trace);  // the daemon runs in /
  if (!FLAGS_f) {
    Daemonize(&ready);
    RedirectDaemonLog(data_dir);
  }
  if (FLAGS_takeover && handover == nullptr) {
    if (!IsMounted(mountpoint)) {
      return ready.Report(absl::StrCat(mountpoint, " is not mounted: nothing to take over")), 1;
    }
    absl::StatusOr<std::unique_ptr<Handover>> asked =
        RequestTakeover(mountpoint, absl::Seconds(300));
    if (!asked.ok()) return ready.Report(std::string(asked.status().message())), 1;
    handover = *std::move(asked);
  }
  if (handover != nullptr && handover->adoption.state.mountpoint() != mountpoint) {
    const std::string why = absl::StrCat("the handed-over mount is at ",
                                         handover->adoption.state.mountpoint(), ", not ",
                                         mountpoint);
    AnswerHandover(*handover, absl::FailedPreconditionError(why)).IgnoreError();
    return ready.Report(why), 1;
  }
  std::unique_ptr<cluster::LocalCluster> local;
  std::string meta = FLAGS_meta;
  int lock_fd = -1;
  if (meta.empty()) {
    auto started = StartEmbeddedCluster(data_dir, &lock_fd);
    if (!started.ok()) return ready.Report(std::string(started.status().message())), 1;
    local = std::move(*started);
    meta = local->meta_address();
    if (FLAGS_cluster_secret_file.empty()) {
      absl::Status loaded = LoadClusterSecret(local->cluster_secret_file(), "logfs mount");
      if (!loaded.ok()) return ready.Report(std::string(loaded.message())), 1;
    }
    LOG(INFO) << "embedded cluster up under " << data_dir << ", meta at " << meta;
  }
  // Declared before `mount`, so it outlives it and writes out the last
  // lookups when the mount is gone.
  std::unique_ptr<cache::BlockTraceWriter> trace;
  fsclient::ClientOptions options = ClientOptionsFromFlags(meta);
  // Told to tools on the mount (user.logfs.cluster_secret_file), so that
  // `logfs bench wal --dir` reaches the segment servers without the flag.
  options.cluster_secret_file = FLAGS_cluster_secret_file.empty() && local != nullptr
                                    ? local->cluster_secret_file()
                                    : FLAGS_cluster_secret_file;
  if (!FLAGS_block_cache_trace.empty()) {
    auto created = cache::BlockTraceWriter::Create(FLAGS_block_cache_trace,
                                                  FLAGS_block_cache_block_bytes, 64ull << 20);
    if (!created.ok()) {
      return ready.Report(absl::StrCat("--block_cache_trace: ", created.status().message())), 1;
    }
    trace = std::move(*created);
    options.block_cache_tracer = trace.get();
  }
  fsclient::Client mount(options);
  absl::Status connected;
  if (handover != nullptr) {
    const proto::MountHandoff& state = handover->adoption.state;
    connected = mount.Resume({state.mount_id(), state.last_call_seq(), state.cache_lease_ms()});
    if (!connected.ok()) AnswerHandover(*handover, connected).IgnoreError();
  } else {
    connected = mount.Connect();
  }
  if (!connected.ok()) {
    ready.Report(std::string(connected.message()));
    return format::IsVersionRefusal(connected) ? format::kExitVersionRefused : 1;
  }
  auto collect = [&mount](metrics::FamilyList& out) {
    fuse::CollectFuseOpMetrics(out);
    mount.CollectMetrics(out);
  };
  // Stops (its destructor) before `mount` goes: scrapes read the mount. A
  // successor over the takeover socket starts it once its predecessor,
  // which listens on the same port, has exited (the listener's thread).
  std::unique_ptr<metrics::MetricsServer> metrics;
  const pid_t predecessor = handover != nullptr ? handover->predecessor : 0;
  if (predecessor <= 0) {
    auto started = StartMetricsServer("mount", collect);
    if (!started.ok()) {
      if (handover != nullptr) AnswerHandover(*handover, started.status()).IgnoreError();
      return ready.Report(std::string(started.status().message())), 1;
    }
    metrics = *std::move(started);
  }
  fuse::SessionControl control;
  HandoffListener listener(control, mountpoint, SigtermHandoffFromFlag(),
                           /*can_hand_off=*/local == nullptr);
  absl::Status listening = listener.Start(predecessor, [&, predecessor] {
    if (predecessor <= 0) return;
    auto started = StartMetricsServer("mount", collect);
    if (started.ok()) {
      metrics = *std::move(started);
    } else {
      LOG(ERROR) << "metrics: " << started.status();
    }
  });
  if (!listening.ok()) {
    if (handover != nullptr) AnswerHandover(*handover, listening).IgnoreError();
    return ready.Report(std::string(listening.message())), 1;
  }
  fuse::SessionOptions session;
  session.mountpoint = mountpoint;
  session.max_threads = FLAGS_fuse_threads;
  session.debug = FLAGS_fuse_debug;
  session.fsname = FLAGS_fsname;
  session.allow_other = FLAGS_allow_other;
  session.read_only = FLAGS_read_only;
  session.adopt = handover != nullptr ? &handover->adoption : nullptr;
  // Ready once the kernel mount is live and meta answered: the waiting
  // parent (mount(8), the helper) and, under systemd (logfs-mount@ is
  // Type=notify with -f), the service manager. Without $NOTIFY_SOCKET
  // sd_notify does nothing; a failed one is systemd's to notice (the start
  // times out). A successor serves once its predecessor let go.
  bool answered = false;
  absl::StatusOr<bool> ran = fuse::RunSession(
      mount, session,
      [&]() -> absl::Status {
        if (handover != nullptr) {
          answered = true;
          // Told to stop before it served: the old daemon keeps the mount
          // (from systemd's store there is none: this one serves and then
          // unmounts, as a stop asks).
          const absl::Status go =
              control.UnmountAsked() && !handover->from_fd_store
                  ? absl::AbortedError("the new daemon was stopped before it served")
                  : absl::OkStatus();
          RETURN_IF_ERROR(AnswerHandover(*handover, go));
          LOG(INFO) << "took over " << mountpoint << " (meta " << meta << ")";
        } else {
          LOG(INFO) << "mounted " << mountpoint << " (meta " << meta << ")";
        }
        ready.Report("");
        if (int r = sd_notify(0, "READY=1"); r < 0)
          LOG(WARNING) << "sd_notify READY=1: " << strerror(-r);
        return absl::OkStatus();
      },
      &control);
  if (handover != nullptr) handover->adoption.fuse_fd = -1;  // the session closed it
  sd_notify(0, "STOPPING=1");
  if (!ran.ok()) {
    if (handover != nullptr && !answered) AnswerHandover(*handover, ran.status()).IgnoreError();
    ready.Report(std::string(ran.status().message()));
  }
  listener.Stop();
  metrics.reset();
  mount.Shutdown();
  if (local != nullptr) local->Stop();
  if (lock_fd >= 0) close(lock_fd);
  if (ran.ok() && *ran) {
    LOG(INFO) << "handed " << mountpoint << " over to a successor";
    return 0;
  }
  LOG(INFO) << "unmounted " << mountpoint;
  return ran.ok() ? 0 : 1;
}

// `logfs mount --help`: the mount's flags, the embedded cluster's and the
// shared ones (the helper lists the same but for those it sets itself).
HelpFlags MountHelp() {
  HelpFlags help{{"mount:", "embedded cluster:"}, {"meta", "data_dir"}};
  help.shared.insert(help.shared.end(), MountSharedFlags().begin(), MountSharedFlags().end());
  return help;
}

}  // namespace

int MountMain(int argc, char** argv) {
  InitProcess(&argc, &argv, "logfs mount [--meta=HOST:PORT] [-f] [--data_dir=DIR] MOUNTPOINT",
              MountHelp());
  if (argc != 2) {
    std::fprintf(stderr, "logfs mount: expected one mount point, got %d arguments\n", argc - 1);
    return 1;
  }
  return RunMount(argv[1]);
}

int UmountMain(int argc, char** argv) {
  InitProcess(&argc, &argv, "logfs umount MOUNTPOINT",
              {{"umount:"}, {}});
  if (argc != 2) {
    std::fprintf(stderr, "logfs umount: expected one mount point\n");
    return 1;
  }
  std::string mountpoint = argv[1];
  char resolved[PATH_MAX];
  if (realpath(mountpoint.c_str(), resolved) == nullptr || !IsMounted(resolved)) {
    std::fprintf(stderr, "logfs umount: %s is not mounted\n", mountpoint.c_str());
    return 1;
  }
  mountpoint = resolved;
  char pid_buf[32] = {0};
  ssize_t n = getxattr(mountpoint.c_str(), format::kMountPidXattr, pid_buf, sizeof(pid_buf) - 1);
  pid_t daemon = n > 0 ? static_cast<pid_t>(std::atoi(pid_buf)) : -1;
  if (!RunFusermount({"-u"}, mountpoint)) {
    std::fprintf(stderr, "logfs umount: fusermount3 -u %s failed\n", mountpoint.c_str());
    return 1;
  }
  // Wait for the daemon (and its embedded cluster) to finish, so that a
  // mount right after this one finds the data dir free.
  absl::Time deadline = absl::Now() + absl::Milliseconds(FLAGS_umount_timeout_ms);
  while (daemon > 0 && kill(daemon, 0) == 0) {
    if (absl::Now() > deadline) {
      std::fprintf(stderr, "logfs umount: daemon %d still running\n", daemon);
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling another process's exit
  }
  return 0;
}

}  // namespace logfs::main
