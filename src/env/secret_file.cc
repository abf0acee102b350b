#include "src/env/secret_file.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/env/posix_file.h"
#include "src/status/syscall_error.h"
#include "src/util/unique_fd.h"

namespace logfs::env {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return SyscallError(errno, "open " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return SyscallError(errno, "fstat " + path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cluster secret file ", path, " is not a regular file"));
  }
  const unsigned mode = st.st_mode & 07777;
  if ((mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "cluster secret file %s has mode %04o: group and others must have no access "
        "(chmod 600 %s)",
        path, mode, path));
  }
  if (st.st_size > static_cast<off_t>(kSecretBytesMax)) {
    return absl::FailedPreconditionError(absl::StrCat("cluster secret file ", path, " holds ",
                                                      st.st_size, " bytes, more than ",
                                                      kSecretBytesMax));
  }
  std::string secret(static_cast<size_t>(st.st_size), '\0');
  // Whatever was read is wiped unless it is returned.
  auto wipe = [&secret] { OPENSSL_cleanse(secret.data(), secret.size()); };
  size_t filled = 0;
  while (filled < secret.size()) {
    const ssize_t n = ::pread(fd.get(), secret.data() + filled, secret.size() - filled, filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      wipe();
      return SyscallError(error, "read " + path);
    }
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  // Keeps the bytes past `filled` (zeros) in the string, so the wipe
  // covers everything that was read; the returned copy is exact.
  const size_t size = filled;
  size_t trimmed = size;
  while (trimmed > 0 && (secret[trimmed - 1] == '\n' || secret[trimmed - 1] == '\r' ||
                         secret[trimmed - 1] == ' ' || secret[trimmed - 1] == '\t')) {
    --trimmed;
  }
  if (trimmed < kSecretBytesMin) {
    wipe();
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster secret file ", path, " holds ", trimmed, " bytes; a secret needs at least ",
        kSecretBytesMin, " (e.g. openssl rand -hex 32 >", path, ")"));
  }
  // Always a copy, then the wipe (moving `secret` out when nothing was
  // trimmed also left nothing behind, but gcc 12 took that move of a
  // local string for an out-of-bounds copy, -Warray-bounds, once the
  // precompiled header changed its inlining).
  std::string exact(secret.data(), trimmed);
  wipe();
  return exact;
}

absl::Status CreateSecretFile(const std::string& path, absl::string_view contents) {
  util::UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    return SyscallError(errno, "create " + path);
  }
  // The umask may only take bits away; make sure of 0600 all the same.
  if (::fchmod(fd.get(), 0600) != 0) return SyscallError(errno, "fchmod " + path);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd.get(), contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "write " + path);
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return SyscallError(errno, "fsync " + path);
  return SyncDir(Dirname(path));
}

}  // namespace logfs::env
