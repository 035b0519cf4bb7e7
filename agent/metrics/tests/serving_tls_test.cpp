// MetricsServer over TLS (ServingCertificate): a client that trusts the CA is answered, a
// plain HTTP request gets no answer, and a certificate rotated in place is presented at the next
// handshake -- unless the new files do not make a pair, when the last good one stays.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "agent/metrics/metrics_server.h"
#include "agent/metrics/tests/raw_client.h"

namespace sonde::agent {
namespace {

namespace fs = std::filesystem;

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Ctx = std::unique_ptr<SSL_CTX, Deleter<SSL_CTX, SSL_CTX_free>>;
using Ssl = std::unique_ptr<SSL, Deleter<SSL, SSL_free>>;

// A CA and the server certificates it signs for "localhost", each with its own serial.
struct TestCa {
  Key key{EVP_EC_gen("P-256")};
  Cert cert = make("sonde test CA", 1, key.get(), nullptr, key.get());

  // A certificate for subject CN=`cn` with `serial`, for `subject_key`, signed by the CA (or by
  // itself when `issuer` is null).
  static Cert make(const std::string& cn, long serial, EVP_PKEY* subject_key, X509* issuer,
                   EVP_PKEY* signer) {
    Cert c(X509_new());
    X509_set_version(c.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c.get()), serial);
    X509_gmtime_adj(X509_getm_notBefore(c.get()), -60);
    X509_gmtime_adj(X509_getm_notAfter(c.get()), 3600);
    X509_set_pubkey(c.get(), subject_key);
    X509_NAME* name = X509_get_subject_name(c.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : name);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer ? issuer : c.get(), c.get(), nullptr, nullptr, 0);
    const char* ext = issuer ? "DNS:localhost" : nullptr;
    if (ext) {
      X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, ext);
      X509_add_ext(c.get(), san, -1);
      X509_EXTENSION_free(san);
    } else {
      X509_EXTENSION* bc =
          X509V3_EXT_conf_nid(nullptr, &v3, NID_basic_constraints, "critical,CA:TRUE");
      X509_add_ext(c.get(), bc, -1);
      X509_EXTENSION_free(bc);
    }
    X509_sign(c.get(), signer, EVP_sha256());
    return c;
  }

  Cert issue(long serial, EVP_PKEY* subject_key) const {
    return make("sonde-agent " + std::to_string(serial), serial, subject_key, cert.get(),
                key.get());
  }
};

void write_pem(const fs::path& path, X509* cert, EVP_PKEY* key) {
  // Written beside and renamed over, as kubelet swaps a Secret's files: a handshake never reads
  // half a file.
  fs::path tmp = path.string() + ".new";
  FILE* f = fopen(tmp.c_str(), "w");
  ASSERT_NE(f, nullptr);
  if (cert) {
    EXPECT_EQ(PEM_write_X509(f, cert), 1);
  }
  if (key) {
    EXPECT_EQ(PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr), 1);
  }
  ASSERT_EQ(fclose(f), 0);
  fs::rename(tmp, path);
}

struct Answer {
  bool handshake = false;
  long serial = -1;   // of the certificate the server presented
  std::string reply;  // the HTTP answer
};

// GET `path` over TLS, trusting only `ca`, checking the name "localhost".
Answer get_tls(int port, X509* ca, const std::string& path) {
  Answer out;
  Ctx ctx(SSL_CTX_new(TLS_client_method()));
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  UniqueFd fd = testing::connect_loopback(port);
  if (!fd.valid()) return out;
  Ssl ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd.get());
  SSL_set_tlsext_host_name(ssl.get(), "localhost");
  SSL_set1_host(ssl.get(), "localhost");
  if (SSL_connect(ssl.get()) != 1) {
    ERR_clear_error();
    return out;
  }
  out.handshake = true;
  Cert peer(SSL_get1_peer_certificate(ssl.get()));
  out.serial = ASN1_INTEGER_get(X509_get0_serialNumber(peer.get()));
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
  char buf[4096];
  int n;
  while ((n = SSL_read(ssl.get(), buf, sizeof buf)) > 0) out.reply.append(buf, n);
  ERR_clear_error();
  return out;
}

class ServingTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sonde-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    write_pem(cert_file(), ca_.issue(10, server_key_.get()).get(), nullptr);
    write_pem(key_file(), nullptr, server_key_.get());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path cert_file() const { return dir_ / "tls.crt"; }
  fs::path key_file() const { return dir_ / "tls.key"; }

  std::unique_ptr<MetricsServer> serve(std::shared_ptr<ServingCertificate> tls) {
    auto server = MetricsServer::start("127.0.0.1:0", {}, {}, std::move(tls));
    EXPECT_TRUE(server.ok()) << server.error().message();
    if (!server.ok()) return nullptr;
    (*server)->add_route("/hello",
                         [](const HttpRequest&) { return HttpResponse{.body = "up 1\n"}; });
    return std::move(*server);
  }

  fs::path dir_;
  TestCa ca_;
  Key server_key_{EVP_EC_gen("P-256")};
};

TEST_F(ServingTlsTest, ServesTheCaTrustingClientAndNoPlainHttp) {
  auto tls = ServingCertificate::load(cert_file(), key_file());
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  EXPECT_EQ((*tls)->stats().subject, "CN=sonde-agent 10");
  EXPECT_GT((*tls)->stats().not_after, time(nullptr) + 3000);
  auto server = serve(*tls);
  ASSERT_NE(server, nullptr);
  Answer a = get_tls(server->port(), ca_.cert.get(), "/hello");
  ASSERT_TRUE(a.handshake);
  EXPECT_EQ(a.serial, 10);
  EXPECT_TRUE(a.reply.starts_with("HTTP/1.1 200 ")) << a.reply;
  EXPECT_NE(a.reply.find("up 1\n"), std::string::npos) << a.reply;

  // A client trusting another CA refuses the server; one speaking plain HTTP gets no HTTP.
  TestCa other;
  EXPECT_FALSE(get_tls(server->port(), other.cert.get(), "/hello").handshake);
  std::string plain = testing::exchange(server->port(), "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.find("HTTP/1.1 200"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("up 1"), std::string::npos) << plain;
}

TEST_F(ServingTlsTest, ARotatedPairIsPresentedAtTheNextHandshake) {
  auto tls = ServingCertificate::load(cert_file(), key_file());
  ASSERT_TRUE(tls.ok()) << tls.error().message();
  auto server = serve(*tls);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(get_tls(server->port(), ca_.cert.get(), "/hello").serial, 10);

  // Renewed: a new key and certificate, written one file after the other. Between the two the
  // files do not make a pair: that attempt fails and the old pair is still presented.
  Key renewed{EVP_EC_gen("P-256")};
  write_pem(cert_file(), ca_.issue(11, renewed.get()).get(), nullptr);
  Answer between = get_tls(server->port(), ca_.cert.get(), "/hello");
  EXPECT_EQ(between.serial, 10);
  EXPECT_TRUE(between.reply.starts_with("HTTP/1.1 200 ")) << between.reply;
  EXPECT_EQ((*tls)->stats().reload_errors, 1U);
  // The same bad files are not read again at every handshake.
  (void)get_tls(server->port(), ca_.cert.get(), "/hello");
  EXPECT_EQ((*tls)->stats().reload_errors, 1U);

  write_pem(key_file(), nullptr, renewed.get());
  Answer after = get_tls(server->port(), ca_.cert.get(), "/hello");
  EXPECT_EQ(after.serial, 11);
  EXPECT_TRUE(after.reply.starts_with("HTTP/1.1 200 ")) << after.reply;
  auto stats = (*tls)->stats();
  EXPECT_EQ(stats.reloads, 1U);
  EXPECT_EQ(stats.reload_errors, 1U);
  EXPECT_EQ(stats.subject, "CN=sonde-agent 11");
}

TEST_F(ServingTlsTest, APairThatDoesNotLoadIsRefusedAtStartWithItsReason) {
  auto missing = ServingCertificate::load(dir_ / "absent.crt", key_file());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("absent.crt"), std::string::npos)
      << missing.error().message();

  Key other{EVP_EC_gen("P-256")};
  write_pem(key_file(), nullptr, other.get());
  auto mismatch = ServingCertificate::load(cert_file(), key_file());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message().find("is not the key of the certificate"), std::string::npos)
      << mismatch.error().message();

  write_pem(cert_file(), nullptr, other.get());  // a key where the certificate should be
  auto no_cert = ServingCertificate::load(cert_file(), key_file());
  ASSERT_FALSE(no_cert.ok());
  EXPECT_NE(no_cert.error().message().find("no PEM certificate"), std::string::npos)
      << no_cert.error().message();
}

}  // namespace
}  // namespace sonde::agent
