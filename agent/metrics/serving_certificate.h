// ServingCertificate: the certificate and private key the agent's HTTP endpoints present when
// they serve TLS (--tls-cert-file, --tls-private-key-file), read again when either file changes.
//
// Certificates rotate under a running agent: cert-manager renews them before they expire, and
// kubelet swaps a mounted Secret's files in place (a new `..data` directory, one rename). Every
// TLS handshake therefore first compares the files' identity (device, inode, size, mtime: two
// stat() calls) with the pair it holds, and reads them again when they differ. A pair that does
// not load (a key that does not match the certificate, a half-written file) is refused with a
// warning and counted, the handshake keeps presenting the last good pair, and the same files
// are not read again until they change again, so a bad Secret costs nothing per connection.
//
// Thread-safe: handshakes run on the server's threads.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"

namespace sonde::agent {

class ServingCertificate {
 public:
  // Reads the pair (PEM: the certificate, then any intermediates; the private key). Fails when
  // either file cannot be read or parsed or the key is not the certificate's.
  static Result<std::shared_ptr<ServingCertificate>> load(std::string cert_file,
                                                          std::string key_file);
  ~ServingCertificate();
  ServingCertificate(const ServingCertificate&) = delete;
  ServingCertificate& operator=(const ServingCertificate&) = delete;

  // Makes `ssl_ctx` (an OpenSSL SSL_CTX*) present the current pair at every handshake.
  void install(void* ssl_ctx);

  struct Stats {
    uint64_t reloads = 0;        // pairs read after start because the files changed
    uint64_t reload_errors = 0;  // changed files that did not load (the last good pair stays)
    std::time_t not_after = 0;   // when the certificate presented now expires
    std::string subject;         // its subject, e.g. "CN=sonde-agent.monitoring.svc"
  };
  // Reads the files again first when they changed, so a scrape sees what the next handshake
  // presents.
  Stats stats();

  const std::string& cert_file() const { return cert_file_; }

 private:
  struct Pair;
  struct FileIds {
    dev_t dev[2] = {};
    ino_t ino[2] = {};
    off_t size[2] = {};
    timespec mtime[2] = {};
    bool operator==(const FileIds& o) const;
  };

  ServingCertificate(std::string cert_file, std::string key_file);
  Result<FileIds> identify() const;
  Result<std::shared_ptr<const Pair>> read_pair() const;
  // Under mu_: reads the files again when their identity changed since the last attempt.
  void refresh_locked();
  std::shared_ptr<const Pair> current();
  static int on_handshake(void* ssl, void* self);

  const std::string cert_file_;
  const std::string key_file_;
  std::mutex mu_;
  std::shared_ptr<const Pair> pair_;  // under mu_
  FileIds tried_;                     // under mu_: the files' identity at the last attempt
  Stats stats_;                       // under mu_ (not_after and subject follow pair_)
};

}  // namespace sonde::agent
