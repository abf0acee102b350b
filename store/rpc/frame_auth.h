// Authentication of RPC connections with a shared cluster secret
// (`--cluster_secret_file`; docs/wire_format.md "Authentication"). All of
// logfs's cryptography is here and in handshake.cc, built on OpenSSL's
// libcrypto (HMAC-SHA256, HKDF-SHA256, AES-256-GCM as GMAC, RAND_bytes); no
// primitive is our own.
//
//   ClusterKey  the secret and this process's id ("segd@host"), immutable.
//   FrameMac    one direction of an authenticated connection: the tag of
//               each frame, GMAC (AES-256-GCM with the frame as additional
//               data and no plaintext, NIST SP 800-38D) under the
//               direction's key with the frame's implicit sequence number
//               as the IV, over its header and body. A tampered, replayed,
//               reordered, dropped or foreign frame fails the next Verify.
//               GMAC, not HMAC-SHA256: half the cost for a 512-byte WAL
//               append and a fifth for 64 KiB on AES-NI hardware, measured
//               with OpenSSL 3.0 (docs/wire_format.md "Authentication").
//   Hello / keys / proofs: the pieces of the handshake (handshake.h), as
//               pure functions for tests. The design follows the
//               challenge-response of Kerberos-less Hadoop/HBase SASL
//               DIGEST and of TLS 1.3's PSK mode: fresh nonces from both
//               sides, keys per direction from HKDF (RFC 5869) salted with
//               both nonces, proofs bound to both hellos and the direction.
#pragma once

#include <openssl/evp.h>
#include <openssl/modes.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/format/frame.h"

namespace logfs::rpc {

// The cluster secret and who this process is. Immutable; shared by every
// connection of a process.
class ClusterKey {
 public:
  // `secret` of at least env::kSecretBytesMin bytes (kInvalidArgument
  // otherwise); `local_id` names this process in peers' logs (at most
  // kAuthIdBytesMax bytes are sent).
  static absl::StatusOr<std::shared_ptr<const ClusterKey>> Create(std::string secret,
                                                                  std::string local_id);
  // Create with the secret in `secret_file` (env::ReadSecretFile: its
  // errors, e.g. a file others may read) and `program@hostname` as the
  // local id ("logfs segd" -> "segd@host").
  static absl::StatusOr<std::shared_ptr<const ClusterKey>> FromFile(const std::string& secret_file,
                                                                    const std::string& program);
  const std::string& secret() const { return secret_; }
  const std::string& local_id() const { return local_id_; }
  ~ClusterKey();  // wipes the secret (OPENSSL_cleanse)

 private:
  ClusterKey(std::string secret, std::string local_id)
      : secret_(std::move(secret)), local_id_(std::move(local_id)) {}
  const std::string secret_;
  const std::string local_id_;
};
using ClusterKeyPtr = std::shared_ptr<const ClusterKey>;

// The key every RpcClient and RpcServer of this process takes when none is
// given (null: no authentication, the wire as without a secret). Set once,
// by main, before the first client or server exists (CHECK); thread-safe.
void SetProcessClusterKey(ClusterKeyPtr key);
ClusterKeyPtr ProcessClusterKey();

inline constexpr size_t kAuthTagBytes = format::kAuthTagBytes;
inline constexpr size_t kAuthKeyBytes = 32;
using AuthKeyBytes = std::array<unsigned char, kAuthKeyBytes>;

// Tags and checks the frames of one direction of a connection. Keyed once
// (no key schedule per frame); a frame only sets its IV. The GCM runs
// through OpenSSL's mode API (CRYPTO_gcm128, with its carry-less-multiply
// GHASH) over an EVP AES-256-ECB block, not through the EVP GCM cipher:
// that one's provider dispatch (OSSL_PARAM lookups to set the IV and to
// get the tag) cost 180 ns a frame, as much as the GHASH of a 512-byte
// append, against 95 ns this way (OpenSSL 3.0.x, AES-NI; same tags).
// Not thread-safe: the writer calls Sign under its lock, the reader Verify
// on its strand.
class FrameMac {
 public:
  explicit FrameMac(const AuthKeyBytes& key);
  ~FrameMac();
  FrameMac(const FrameMac&) = delete;
  FrameMac& operator=(const FrameMac&) = delete;

  // The tag of the next frame of this direction (its sequence number is
  // the count of frames signed before it).
  void Sign(const char header[format::kFrameHeaderBytes], absl::string_view message,
            absl::string_view data, char tag[kAuthTagBytes]);
  // Whether `tag` is the next frame's (constant-time compare). A frame
  // that fails leaves the connection unusable: the caller closes it.
  bool Verify(const char header[format::kFrameHeaderBytes], absl::string_view message,
              absl::string_view data, const char tag[kAuthTagBytes]);

  uint64_t sequence() const { return sequence_; }

 private:
  void Compute(const char* header, absl::string_view message, absl::string_view data,
               unsigned char out[kAuthTagBytes]);

  EVP_CIPHER_CTX* block_ = nullptr;  // AES-256-ECB under the key
  GCM128_CONTEXT* gcm_ = nullptr;    // over block_
  uint64_t sequence_ = 0;
};

// The two directions of an authenticated connection.
struct AuthSession {
  std::unique_ptr<FrameMac> send;
  std::unique_ptr<FrameMac> receive;
  std::string peer_id;
};

// ---- The handshake's messages (docs/wire_format.md "Authentication") ----

enum class AuthRole : uint8_t { kClient = 1, kServer = 2 };
inline constexpr size_t kAuthNonceBytes = 32;
inline constexpr size_t kAuthIdBytesMax = 64;
inline constexpr size_t kAuthHelloBytes = 8 + kAuthNonceBytes + kAuthIdBytesMax;  // 104
inline constexpr size_t kAuthProofBytes = 32;
static_assert(format::kMaxMessageBytes + format::kMaxDataBytes < (1u << 31),
              "EVP_EncryptUpdate takes an int length");
static_assert(kAuthHelloBytes >= format::kFrameHeaderBytes,
              "a peer tells a hello from a frame by a frame header's first bytes");

struct AuthHello {
  AuthRole role = AuthRole::kClient;
  std::string nonce;  // kAuthNonceBytes
  std::string id;     // <= kAuthIdBytesMax
};

// A hello with a fresh random nonce (RAND_bytes). kInternal if the random
// generator fails.
absl::StatusOr<AuthHello> NewHello(AuthRole role, absl::string_view id);
std::string EncodeHello(const AuthHello& hello);  // kAuthHelloBytes
// kInvalidArgument for a bad magic, version, role or id length, or a
// nonzero reserved byte or id padding byte.
absl::StatusOr<AuthHello> DecodeHello(absl::string_view bytes);

// The keys of one connection: HKDF-SHA256 of the secret, salted with both
// nonces, with both encoded hellos in the info.
struct AuthKeys {
  ~AuthKeys();  // wipes the keys (OPENSSL_cleanse)
  AuthKeyBytes proof;
  AuthKeyBytes client_to_server;
  AuthKeyBytes server_to_client;
};
absl::StatusOr<AuthKeys> DeriveAuthKeys(absl::string_view secret, absl::string_view client_hello,
                                        absl::string_view server_hello);

// What `role` sends to prove it knows the secret: HMAC-SHA256 under the
// proof key of the role's label and both encoded hellos.
std::string AuthProof(const AuthKeys& keys, AuthRole role, absl::string_view client_hello,
                      absl::string_view server_hello);
// Constant-time equality of two proofs.
bool ProofsEqual(absl::string_view a, absl::string_view b);

}  // namespace logfs::rpc
