// FakeApiServer: starts common/kube/testing/fake_apiserver.py on an ephemeral loopback port
// for the lifetime of a test and drives its /_fake control endpoints. Test-only.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/kube/api_client.h"

namespace sonde::kube::testing {

class FakeApiServer {
 public:
  struct Options {
    std::string tls_cert_file;  // serve HTTPS with this certificate (and key) when set
    std::string tls_key_file;
    std::string token;  // require this bearer token on API paths when set
    // Authorize with the RBAC objects in this YAML file (e.g. `helm template` output); each
    // identity is "TOKEN=USER", USER "admin" or "system:serviceaccount:NS:NAME".
    std::string rbac_file;
    std::vector<std::string> identities;
  };

  // Starts the server; aborts the test binary if python3 or the script cannot be started.
  FakeApiServer() : FakeApiServer(Options{}) {}
  explicit FakeApiServer(const Options& options);
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const { return port_; }
  std::string url() const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
  }
  // A configuration pointing at this server (the bearer token when one is required; a TLS
  // server's CA is left for the test to set).
  ClientConfig client_config() const;
  // Writes a kubeconfig for this server to `path` (for the operator binary).
  void write_kubeconfig(const std::string& path, const std::string& token = "fake-token") const;

  // POST /_fake/<what> with `body`; aborts on failure (a broken fixture, not a test result).
  Json control(const std::string& what, const Json& body = Json::object());
  // The request log: [{"method","path","query":{...},"status","userAgent","time"}].
  Json requests();
  void clear_requests();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool tls_ = false;
  std::string token_;
  std::unique_ptr<ApiClient> control_client_;
};

}  // namespace sonde::kube::testing
