#include "store/rpc/frame_auth.h"

#include <glog/logging.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/modes.h>
#include <openssl/rand.h>

#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/env/secret_file.h"
#include "src/util/coding.h"

namespace logfs::rpc {
namespace {

constexpr uint8_t kHelloVersion = 1;
constexpr char kKdfInfo[] = "logfs rpc auth v1";
constexpr char kClientProofLabel[] = "logfs client proof";
constexpr char kServerProofLabel[] = "logfs server proof";

// The HMAC implementation, fetched once (a fetch is a lookup in OpenSSL's
// provider tables, too slow per connection).
EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* mac = [] {
    EVP_MAC* m = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    CHECK(m != nullptr) << "OpenSSL has no HMAC";
    return m;
  }();
  return mac;
}

// A fresh HMAC-SHA256 context keyed with `key`.
EVP_MAC_CTX* NewHmacSha256(const unsigned char* key, size_t key_bytes) {
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(HmacAlgorithm());
  CHECK(ctx != nullptr);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  CHECK_EQ(EVP_MAC_init(ctx, key, key_bytes, params), 1) << "HMAC-SHA256 init failed";
  return ctx;
}

void Update(EVP_MAC_CTX* ctx, absl::string_view bytes) {
  if (bytes.empty()) return;
  CHECK_EQ(EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()),
           1);
}

void Final(EVP_MAC_CTX* ctx, unsigned char out[32]) {
  size_t n = 0;
  CHECK_EQ(EVP_MAC_final(ctx, out, &n, 32), 1);
  CHECK_EQ(n, 32u);
}

absl::Mutex process_key_mu(absl::kConstInit);
ClusterKeyPtr* process_key ABSL_GUARDED_BY(process_key_mu) = nullptr;
bool process_key_read ABSL_GUARDED_BY(process_key_mu) = false;

}  // namespace

absl::StatusOr<ClusterKeyPtr> ClusterKey::Create(std::string secret, std::string local_id) {
  if (secret.size() < env::kSecretBytesMin) {
    const size_t bytes = secret.size();
    OPENSSL_cleanse(secret.data(), secret.size());
    return absl::InvalidArgumentError(absl::StrCat("a cluster secret needs at least ",
                                                   env::kSecretBytesMin, " bytes, not ", bytes));
  }
  if (local_id.size() > kAuthIdBytesMax) local_id.resize(kAuthIdBytesMax);
  return ClusterKeyPtr(new ClusterKey(std::move(secret), std::move(local_id)));
}

absl::StatusOr<ClusterKeyPtr> ClusterKey::FromFile(const std::string& secret_file,
                                                   const std::string& program) {
  auto secret = env::ReadSecretFile(secret_file);
  if (!secret.ok()) return secret.status();
  const size_t space = program.rfind(' ');
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return Create(std::move(*secret),
                absl::StrCat(space == std::string::npos ? program : program.substr(space + 1), "@",
                             host));
}

ClusterKey::~ClusterKey() { OPENSSL_cleanse(const_cast<char*>(secret_.data()), secret_.size()); }

AuthKeys::~AuthKeys() { OPENSSL_cleanse(this, sizeof(*this)); }

void SetProcessClusterKey(ClusterKeyPtr key) {
  absl::MutexLock lock(&process_key_mu);
  CHECK(!process_key_read) << "SetProcessClusterKey after the first connection";
  delete process_key;
  process_key = new ClusterKeyPtr(std::move(key));
}

ClusterKeyPtr ProcessClusterKey() {
  absl::MutexLock lock(&process_key_mu);
  process_key_read = true;
  return process_key != nullptr ? *process_key : nullptr;
}

namespace {

// CRYPTO_gcm128's block function: AES-256 of one block through the EVP
// AES-256-ECB context `key` (keyed once, no padding).
void EncryptBlock(const unsigned char in[16], unsigned char out[16], const void* key) {
  int n = 0;
  CHECK_EQ(EVP_EncryptUpdate(static_cast<EVP_CIPHER_CTX*>(const_cast<void*>(key)), out, &n, in, 16),
           1);
  CHECK_EQ(n, 16);
}

}  // namespace

FrameMac::FrameMac(const AuthKeyBytes& key) : block_(EVP_CIPHER_CTX_new()) {
  CHECK(block_ != nullptr);
  CHECK_EQ(EVP_EncryptInit_ex(block_, EVP_aes_256_ecb(), nullptr, key.data(), nullptr), 1)
      << "AES-256 init failed";
  CHECK_EQ(EVP_CIPHER_CTX_set_padding(block_, 0), 1);
  gcm_ = CRYPTO_gcm128_new(block_, &EncryptBlock);
  CHECK(gcm_ != nullptr);
}

FrameMac::~FrameMac() {
  CRYPTO_gcm128_release(gcm_);  // cleanses the hash key
  EVP_CIPHER_CTX_free(block_);  // cleanses the key schedule
}

void FrameMac::Compute(const char* header, absl::string_view message, absl::string_view data,
                       unsigned char out[kAuthTagBytes]) {
  // The 96-bit IV: 4 zero bytes, then the sequence number. Unique per key,
  // as GCM needs: each connection and direction has a key of its own, and
  // the sequence only grows.
  unsigned char iv[12] = {};
  util::EncodeFixed64(reinterpret_cast<char*>(iv + 4), sequence_++);
  CRYPTO_gcm128_setiv(gcm_, iv, sizeof(iv));
  auto aad = [&](const void* bytes, size_t size) {
    if (size == 0) return;
    CHECK_EQ(CRYPTO_gcm128_aad(gcm_, static_cast<const unsigned char*>(bytes), size), 0);
  };
  aad(header, format::kFrameHeaderBytes);
  aad(message.data(), message.size());
  aad(data.data(), data.size());
  CRYPTO_gcm128_tag(gcm_, out, kAuthTagBytes);
}

void FrameMac::Sign(const char header[format::kFrameHeaderBytes], absl::string_view message,
                    absl::string_view data, char tag[kAuthTagBytes]) {
  Compute(header, message, data, reinterpret_cast<unsigned char*>(tag));
}

bool FrameMac::Verify(const char header[format::kFrameHeaderBytes], absl::string_view message,
                      absl::string_view data, const char tag[kAuthTagBytes]) {
  unsigned char expected[kAuthTagBytes];
  Compute(header, message, data, expected);
  return CRYPTO_memcmp(expected, tag, kAuthTagBytes) == 0;
}

absl::StatusOr<AuthHello> NewHello(AuthRole role, absl::string_view id) {
  AuthHello hello;
  hello.role = role;
  hello.id = std::string(id.substr(0, kAuthIdBytesMax));
  hello.nonce.resize(kAuthNonceBytes);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(hello.nonce.data()), kAuthNonceBytes) != 1) {
    return absl::InternalError("RAND_bytes failed: no nonce for the authentication handshake");
  }
  return hello;
}

//   offset size field
//        0    4 magic     kAuthHelloMagic ("LGFA")
//        4    1 version   1
//        5    1 role      1 client, 2 server
//        6    1 id_bytes  <= 64
//        7    1 zero
//        8   32 nonce
//       40   64 id, zero-padded
std::string EncodeHello(const AuthHello& hello) {
  CHECK_EQ(hello.nonce.size(), kAuthNonceBytes);
  CHECK_LE(hello.id.size(), kAuthIdBytesMax);
  std::string out(kAuthHelloBytes, '\0');
  util::EncodeFixed32(out.data(), format::kAuthHelloMagic);
  out[4] = static_cast<char>(kHelloVersion);
  out[5] = static_cast<char>(hello.role);
  out[6] = static_cast<char>(hello.id.size());
  std::memcpy(out.data() + 8, hello.nonce.data(), kAuthNonceBytes);
  std::memcpy(out.data() + 8 + kAuthNonceBytes, hello.id.data(), hello.id.size());
  return out;
}

absl::StatusOr<AuthHello> DecodeHello(absl::string_view bytes) {
  if (bytes.size() != kAuthHelloBytes) {
    return absl::InvalidArgumentError(absl::StrCat("hello of ", bytes.size(), " bytes"));
  }
  const uint32_t magic = util::DecodeFixed32(bytes.data());
  if (magic == format::kFrameMagic) {
    return absl::UnauthenticatedError(
        "the peer sent a plain frame, not an authentication hello: it has no cluster secret; "
        "check --cluster_secret_file");
  }
  if (magic != format::kAuthHelloMagic) {
    return absl::InvalidArgumentError(absl::StrCat("bad hello magic 0x", absl::Hex(magic)));
  }
  if (static_cast<uint8_t>(bytes[4]) != kHelloVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported hello version ", static_cast<uint8_t>(bytes[4])));
  }
  AuthHello hello;
  const uint8_t role = static_cast<uint8_t>(bytes[5]);
  if (role != static_cast<uint8_t>(AuthRole::kClient) &&
      role != static_cast<uint8_t>(AuthRole::kServer)) {
    return absl::InvalidArgumentError(absl::StrCat("bad hello role ", role));
  }
  hello.role = static_cast<AuthRole>(role);
  const size_t id_bytes = static_cast<uint8_t>(bytes[6]);
  if (id_bytes > kAuthIdBytesMax) {
    return absl::InvalidArgumentError(absl::StrCat("hello id of ", id_bytes, " bytes"));
  }
  const absl::string_view padding = bytes.substr(8 + kAuthNonceBytes + id_bytes);
  if (bytes[7] != '\0' || padding.find_first_not_of('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("hello with a nonzero reserved or padding byte");
  }
  hello.nonce = std::string(bytes.substr(8, kAuthNonceBytes));
  hello.id = std::string(bytes.substr(8 + kAuthNonceBytes, id_bytes));
  return hello;
}

absl::StatusOr<AuthKeys> DeriveAuthKeys(absl::string_view secret, absl::string_view client_hello,
                                        absl::string_view server_hello) {
  CHECK_EQ(client_hello.size(), kAuthHelloBytes);
  CHECK_EQ(server_hello.size(), kAuthHelloBytes);
  std::string salt = absl::StrCat(client_hello.substr(8, kAuthNonceBytes),
                                  server_hello.substr(8, kAuthNonceBytes));
  std::string info = absl::StrCat(kKdfInfo, client_hello, server_hello);
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return absl::InternalError("OpenSSL has no HKDF");
  EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return absl::InternalError("EVP_KDF_CTX_new failed");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt.data(), salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end()};
  unsigned char out[3 * kAuthKeyBytes];
  const int ok = EVP_KDF_derive(ctx, out, sizeof(out), params);
  EVP_KDF_CTX_free(ctx);
  if (ok != 1) return absl::InternalError("HKDF-SHA256 failed");
  AuthKeys keys;
  std::memcpy(keys.proof.data(), out, kAuthKeyBytes);
  std::memcpy(keys.client_to_server.data(), out + kAuthKeyBytes, kAuthKeyBytes);
  std::memcpy(keys.server_to_client.data(), out + 2 * kAuthKeyBytes, kAuthKeyBytes);
  OPENSSL_cleanse(out, sizeof(out));
  return keys;
}

std::string AuthProof(const AuthKeys& keys, AuthRole role, absl::string_view client_hello,
                      absl::string_view server_hello) {
  EVP_MAC_CTX* ctx = NewHmacSha256(keys.proof.data(), keys.proof.size());
  Update(ctx, role == AuthRole::kClient ? kClientProofLabel : kServerProofLabel);
  Update(ctx, client_hello);
  Update(ctx, server_hello);
  unsigned char out[32];
  Final(ctx, out);
  EVP_MAC_CTX_free(ctx);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

bool ProofsEqual(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace logfs::rpc
