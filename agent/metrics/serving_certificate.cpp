#include "agent/metrics/serving_certificate.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "common/log.h"

namespace sonde::agent {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using UniqueBio = std::unique_ptr<BIO, BioFree>;

// The oldest error OpenSSL queued on this thread (the cause; later ones are context), or `none`.
std::string openssl_error(const char* none) {
  unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return none;
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

Result<UniqueBio> open_pem(const std::string& path, const char* what) {
  UniqueBio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    int err = errno;
    ERR_clear_error();
    return errno_error(std::string("read the TLS ") + what + " " + path, err);
  }
  return bio;
}

std::string subject_of(X509* cert) {
  UniqueBio out(BIO_new(BIO_s_mem()));
  if (!out || X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
    return "";
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(out.get(), &data);  // NOLINT(google-runtime-int): OpenSSL's type
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
}

}  // namespace

struct ServingCertificate::Pair {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;  // intermediates after the leaf in the file; may be empty
  EVP_PKEY* key = nullptr;
  std::time_t not_after = 0;
  std::string subject;

  Pair() = default;
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  ~Pair() {
    X509_free(leaf);
    sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

bool ServingCertificate::FileIds::operator==(const FileIds& o) const {
  for (int i = 0; i < 2; ++i) {
    if (dev[i] != o.dev[i] || ino[i] != o.ino[i] || size[i] != o.size[i] ||
        mtime[i].tv_sec != o.mtime[i].tv_sec || mtime[i].tv_nsec != o.mtime[i].tv_nsec) {
      return false;
    }
  }
  return true;
}

ServingCertificate::ServingCertificate(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

ServingCertificate::~ServingCertificate() = default;

Result<std::shared_ptr<ServingCertificate>> ServingCertificate::load(std::string cert_file,
                                                                     std::string key_file) {
  std::shared_ptr<ServingCertificate> self(
      new ServingCertificate(std::move(cert_file), std::move(key_file)));
  ASSIGN_OR_RETURN(self->tried_, self->identify());
  ASSIGN_OR_RETURN(self->pair_, self->read_pair());
  self->stats_.not_after = self->pair_->not_after;
  self->stats_.subject = self->pair_->subject;
  return self;
}

Result<ServingCertificate::FileIds> ServingCertificate::identify() const {
  FileIds ids;
  const std::string* paths[2] = {&cert_file_, &key_file_};
  for (int i = 0; i < 2; ++i) {
    struct stat st {};
    if (stat(paths[i]->c_str(), &st) != 0) return errno_error("stat " + *paths[i], errno);
    ids.dev[i] = st.st_dev;
    ids.ino[i] = st.st_ino;
    ids.size[i] = st.st_size;
    ids.mtime[i] = st.st_mtim;
  }
  return ids;
}

Result<std::shared_ptr<const ServingCertificate::Pair>> ServingCertificate::read_pair() const {
  ERR_clear_error();
  auto pair = std::make_shared<Pair>();
  {
    ASSIGN_OR_RETURN(auto bio, open_pem(cert_file_, "certificate"));
    pair->leaf = PEM_read_bio_X509_AUX(bio.get(), nullptr, nullptr, nullptr);
    if (!pair->leaf) {
      return Error("no PEM certificate in " + cert_file_ + ": " + openssl_error("empty file"));
    }
    pair->chain = sk_X509_new_null();
    while (X509* next = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      if (!pair->chain || sk_X509_push(pair->chain, next) == 0) {
        X509_free(next);
        return Error("out of memory reading " + cert_file_);
      }
    }
    ERR_clear_error();  // the loop ends on "no start line", which is the end of the file
  }
  {
    ASSIGN_OR_RETURN(auto bio, open_pem(key_file_, "private key"));
    pair->key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (!pair->key) {
      return Error("no PEM private key in " + key_file_ + ": " + openssl_error("empty file"));
    }
  }
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    return Error("the private key " + key_file_ + " is not the key of the certificate " +
                 cert_file_ + ": " + openssl_error("mismatch"));
  }
  tm expiry{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(pair->leaf), &expiry) == 1) {
    pair->not_after = timegm(&expiry);
  }
  pair->subject = subject_of(pair->leaf);
  return std::shared_ptr<const Pair>(std::move(pair));
}

void ServingCertificate::refresh_locked() {
  auto ids = identify();
  if (!ids.ok() || *ids == tried_) return;  // unchanged, or mid-swap: the next call sees it
  tried_ = *ids;
  auto pair = read_pair();
  if (!pair.ok()) {
    ++stats_.reload_errors;
    log::warn("TLS certificate not reloaded: the last good one is still presented",
              {{"error", pair.error().message()}});
    return;
  }
  pair_ = std::move(*pair);
  ++stats_.reloads;
  stats_.not_after = pair_->not_after;
  stats_.subject = pair_->subject;
  log::info("TLS certificate reloaded",
            {{"subject", pair_->subject}, {"not_after", static_cast<int64_t>(pair_->not_after)}});
}

std::shared_ptr<const ServingCertificate::Pair> ServingCertificate::current() {
  std::lock_guard lock(mu_);
  refresh_locked();
  return pair_;
}

ServingCertificate::Stats ServingCertificate::stats() {
  std::lock_guard lock(mu_);
  refresh_locked();
  return stats_;
}

int ServingCertificate::on_handshake(void* ssl, void* self) {
  auto pair = static_cast<ServingCertificate*>(self)->current();
  // SSL_use_cert_and_key takes its own references: the pair may be replaced meanwhile.
  return SSL_use_cert_and_key(static_cast<SSL*>(ssl), pair->leaf, pair->key, pair->chain,
                              /*override=*/1);
}

void ServingCertificate::install(void* ssl_ctx) {
  SSL_CTX_set_cert_cb(
      static_cast<SSL_CTX*>(ssl_ctx), [](SSL* ssl, void* self) { return on_handshake(ssl, self); },
      this);
}

}  // namespace sonde::agent
