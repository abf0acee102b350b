#include "store/rpc/handshake.h"

#include <glog/logging.h>
#include <openssl/crypto.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/coding.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"

namespace logfs::rpc {
namespace {

constexpr char kCheckSecret[] = "check --cluster_secret_file";

absl::Status Refused(absl::string_view what) { return absl::UnauthenticatedError(what); }

// One handshake in progress: its buffers, and `done` until it runs.
struct Handshake {
  Handshake(StreamSocket& s, ClusterKeyPtr k, std::string p, HandshakeDone d)
      : socket(s),
        key(std::move(k)),
        peer(std::move(p)),
        done(std::move(d)),
        timer(s.get_executor()) {}
  ~Handshake() { OPENSSL_cleanse(&keys, sizeof(keys)); }

  // Whether the socket now carries another connection (the caller's
  // `current` said so): then the handshake has ended, and the step must
  // not touch the socket.
  bool Superseded() {
    if (current == nullptr || current()) return false;
    Finish(absl::UnavailableError(
        absl::StrCat("authentication handshake with ", peer, " abandoned: connection replaced")));
    return true;
  }

  void Finish(absl::StatusOr<AuthSession> session) {
    timer.cancel();
    if (done) std::exchange(done, nullptr)(std::move(session));
  }
  // Ends the handshake on a failed read or write.
  void Lost(asio::error_code ec, absl::string_view during) {
    if (timed_out) {
      return Finish(Refused(absl::StrCat("no authentication handshake from ", peer, " in time")));
    }
    // Unavailable, not Unauthenticated: a reset or a peer that restarts
    // mid-handshake is a network failure the caller retries; a bad proof,
    // a bad hello or a plain answer are refusals (Refused) it does not.
    Finish(absl::UnavailableError(absl::StrCat(
        peer, peer_id.empty() ? "" : absl::StrCat(" (", peer_id, ")"),
        " closed the connection during the authentication handshake (", during, ": ", ec.message(),
        "): the network failed, or it has another cluster secret, or none; ", kCheckSecret)));
  }

  StreamSocket& socket;
  const ClusterKeyPtr key;
  const std::string peer;
  HandshakeDone done;
  HandshakeCurrent current;  // null: the socket is never reused
  asio::steady_timer timer;
  bool timed_out = false;
  std::string peer_id;       // from its hello, once read
  std::string client_hello;  // encoded
  std::string server_hello;  // encoded
  std::string in;            // bytes being read
  std::string out;           // bytes being written
  AuthKeys keys;
};

AuthSession MakeSession(const AuthKeys& keys, AuthRole role, std::string peer_id) {
  AuthSession session;
  const bool client = role == AuthRole::kClient;
  session.send = std::make_unique<FrameMac>(client ? keys.client_to_server : keys.server_to_client);
  session.receive =
      std::make_unique<FrameMac>(client ? keys.server_to_client : keys.client_to_server);
  session.peer_id = std::move(peer_id);
  return session;
}

// Client, after its hello went out: reads the server's hello and proof.
void ClientReadServerHello(std::shared_ptr<Handshake> h) {
  h->in.assign(format::kFrameHeaderBytes, '\0');
  asio::async_read(h->socket, asio::buffer(h->in), [h](asio::error_code ec, size_t) {
    if (h->Superseded()) return;
    if (ec) return h->Lost(ec, "reading its hello");
    if (util::DecodeFixed32(h->in.data()) == format::kFrameMagic) {
      return h->Finish(Refused(absl::StrCat(h->peer, " answered with a plain frame: it runs ",
                                            "without a cluster secret; ", kCheckSecret)));
    }
    const size_t rest = kAuthHelloBytes - format::kFrameHeaderBytes + kAuthProofBytes;
    h->in.resize(format::kFrameHeaderBytes + rest);
    asio::async_read(
        h->socket, asio::buffer(h->in.data() + format::kFrameHeaderBytes, rest),
        [h](asio::error_code ec, size_t) {
          if (h->Superseded()) return;
          if (ec) return h->Lost(ec, "reading its hello");
          h->server_hello = h->in.substr(0, kAuthHelloBytes);
          auto hello = DecodeHello(h->server_hello);
          if (!hello.ok() || hello->role != AuthRole::kServer) {
            return h->Finish(
                Refused(absl::StrCat("bad authentication hello from ", h->peer, ": ",
                                     hello.ok() ? "not a server's" : hello.status().message())));
          }
          auto keys = DeriveAuthKeys(h->key->secret(), h->client_hello, h->server_hello);
          if (!keys.ok()) return h->Finish(keys.status());
          h->keys = *keys;  // the copy in `keys` wipes itself (~AuthKeys)
          const std::string expected =
              AuthProof(h->keys, AuthRole::kServer, h->client_hello, h->server_hello);
          if (!ProofsEqual(expected, absl::string_view(h->in).substr(kAuthHelloBytes))) {
            return h->Finish(Refused(absl::StrCat(
                h->peer, " (", hello->id, ") refused authentication: its proof does not match ",
                "this process's cluster secret; ", kCheckSecret)));
          }
          h->out = AuthProof(h->keys, AuthRole::kClient, h->client_hello, h->server_hello);
          asio::async_write(h->socket, asio::buffer(h->out),
                            [h, id = hello->id](asio::error_code ec, size_t) {
                              if (h->Superseded()) return;
                              if (ec) return h->Lost(ec, "sending our proof");
                              h->Finish(MakeSession(h->keys, AuthRole::kClient, id));
                            });
        });
  });
}

// Server: a plain frame came where the hello belongs. Answers it with an
// error frame (the peer's call fails with a clear reason, not a reset),
// then fails the handshake.
void ServerRefusePlainFrame(std::shared_ptr<Handshake> h) {
  auto header = format::DecodeFrameHeader(h->in.data());
  const absl::Status reason = Refused(absl::StrCat(
      "this server authenticates its connections and the request carried no authentication: "
      "give the caller the cluster's secret (",
      kCheckSecret, ")"));
  const absl::Status logged = Refused(absl::StrCat("unauthenticated frame from ", h->peer,
                                                   ": it has no cluster secret; ", kCheckSecret));
  if (!header.ok()) return h->Finish(logged);
  const std::string body = format::EncodeErrorBody(reason);
  h->out = format::EncodeFrame(format::kFlagResponse | format::kFlagError,
                               static_cast<format::MessageType>(header->type), header->request_id,
                               body, {});
  asio::async_write(h->socket, asio::buffer(h->out),
                    [h, logged](asio::error_code, size_t) { h->Finish(logged); });
}

void ServerReadClientProof(std::shared_ptr<Handshake> h, std::string client_id) {
  h->in.assign(kAuthProofBytes, '\0');
  asio::async_read(h->socket, asio::buffer(h->in), [h, client_id](asio::error_code ec, size_t) {
    if (ec) return h->Lost(ec, "reading its proof");
    const std::string expected =
        AuthProof(h->keys, AuthRole::kClient, h->client_hello, h->server_hello);
    if (!ProofsEqual(expected, h->in)) {
      return h->Finish(Refused(absl::StrCat(h->peer, " (", client_id, ") failed authentication: ",
                                            "its proof does not match this server's cluster ",
                                            "secret; ", kCheckSecret)));
    }
    h->Finish(MakeSession(h->keys, AuthRole::kServer, client_id));
  });
}

// Server, once the client's hello is whole: answers with its own and its
// proof, then waits for the client's proof.
void ServerAnswerHello(std::shared_ptr<Handshake> h) {
  h->client_hello = h->in;
  auto hello = DecodeHello(h->client_hello);
  if (!hello.ok() || hello->role != AuthRole::kClient) {
    return h->Finish(
        Refused(absl::StrCat("bad authentication hello from ", h->peer, ": ",
                             hello.ok() ? "not a client's" : hello.status().message())));
  }
  h->peer_id = hello->id;
  auto mine = NewHello(AuthRole::kServer, h->key->local_id());
  if (!mine.ok()) return h->Finish(mine.status());
  h->server_hello = EncodeHello(*mine);
  auto keys = DeriveAuthKeys(h->key->secret(), h->client_hello, h->server_hello);
  if (!keys.ok()) return h->Finish(keys.status());
  h->keys = *keys;
  h->out =
      h->server_hello + AuthProof(h->keys, AuthRole::kServer, h->client_hello, h->server_hello);
  asio::async_write(h->socket, asio::buffer(h->out),
                    [h, id = hello->id](asio::error_code ec, size_t) {
                      if (ec) return h->Lost(ec, "sending our hello");
                      ServerReadClientProof(h, id);
                    });
}

}  // namespace

void AsyncClientHandshake(StreamSocket& socket, ClusterKeyPtr key, std::string peer,
                          HandshakeCurrent current, HandshakeDone done) {
  auto h = std::make_shared<Handshake>(socket, std::move(key), std::move(peer), std::move(done));
  h->current = std::move(current);
  auto hello = NewHello(AuthRole::kClient, h->key->local_id());
  if (!hello.ok()) {
    asio::post(socket.get_executor(), [h, status = hello.status()] { h->Finish(status); });
    return;
  }
  h->client_hello = EncodeHello(*hello);
  asio::async_write(h->socket, asio::buffer(h->client_hello), [h](asio::error_code ec, size_t) {
    if (h->Superseded()) return;
    if (ec) return h->Lost(ec, "sending our hello");
    ClientReadServerHello(h);
  });
}

void AsyncServerHandshake(StreamSocket& socket, ClusterKeyPtr key, std::string peer,
                          absl::Duration timeout, HandshakeDone done) {
  auto h = std::make_shared<Handshake>(socket, std::move(key), std::move(peer), std::move(done));
  h->timer.expires_after(absl::ToChronoMilliseconds(timeout));
  h->timer.async_wait([h](asio::error_code ec) {
    if (ec || !h->done) return;  // cancelled: the handshake ended
    h->timed_out = true;
    asio::error_code ignored;
    h->socket.cancel(ignored);
  });
  // A frame header is shorter than a hello: read that much first, so that
  // a plain frame (a peer without a secret) is told apart without waiting
  // for bytes that will not come.
  h->in.assign(format::kFrameHeaderBytes, '\0');
  asio::async_read(h->socket, asio::buffer(h->in), [h](asio::error_code ec, size_t) {
    if (ec) return h->Lost(ec, "reading its hello");
    if (util::DecodeFixed32(h->in.data()) == format::kFrameMagic) return ServerRefusePlainFrame(h);
    const size_t rest = kAuthHelloBytes - format::kFrameHeaderBytes;
    h->in.resize(kAuthHelloBytes);
    asio::async_read(h->socket, asio::buffer(h->in.data() + format::kFrameHeaderBytes, rest),
                     [h](asio::error_code ec, size_t) {
                       if (ec) return h->Lost(ec, "reading its hello");
                       ServerAnswerHello(h);
                     });
  });
}

}  // namespace logfs::rpc
