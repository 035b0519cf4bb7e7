// libssl.so for civetweb (see CMakeLists.txt here): OpenSSL 3's libssl, plus the one function
// Debian 12's civetweb asks for by a name OpenSSL 3 no longer exports.
#include <openssl/ssl.h>

// OpenSSL 3 renamed it SSL_get1_peer_certificate (same behaviour: the caller owns a reference)
// and keeps the old name only as a macro.
#undef SSL_get_peer_certificate
__attribute__((visibility("default"))) X509* SSL_get_peer_certificate(const SSL* ssl);

X509* SSL_get_peer_certificate(const SSL* ssl) {
  return SSL_get1_peer_certificate(ssl);
}
