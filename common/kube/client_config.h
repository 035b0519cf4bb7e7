// ClientConfig: where the API server is and how to authenticate to it, from the pod's service
// account (in-cluster) or from a kubeconfig file (out-of-cluster). Loading reads files once;
// the bearer token file is re-read by the API client while it runs, because bound service
// account tokens are rotated by the kubelet.
#pragma once

#include <map>
#include <string>

#include "common/result.h"

namespace sonde::kube {

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct ClientConfig {
  std::string server;             // "https://10.96.0.1:443" or "http://127.0.0.1:8080"
  std::string bearer_token;       // used when bearer_token_file is empty
  std::string bearer_token_file;  // re-read periodically when set
  std::string ca_pem;             // trusted CA bundle (PEM); empty: system trust store
  std::string client_cert_pem;    // client certificate authentication (PEM), optional
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;
  std::string default_namespace;  // the pod's namespace, or the kubeconfig context's
};

// In-cluster configuration from KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT (passed in so
// tests need not set the environment) and the service account files under `sa_dir`.
Result<ClientConfig> in_cluster_config(const std::string& service_host,
                                       const std::string& service_port,
                                       const std::string& sa_dir = kServiceAccountDir);

// Configuration from a kubeconfig file: the named context, or current-context when empty.
// Supports server, certificate-authority(-data), insecure-skip-tls-verify, token, tokenFile,
// client-certificate(-data) and client-key(-data); exec/auth-provider plugins are rejected
// with an error that says so.
Result<ClientConfig> kubeconfig_config(const std::string& path, const std::string& context = "");

// What the binaries use: `kubeconfig_path` when given; otherwise in-cluster when
// KUBERNETES_SERVICE_HOST is set; otherwise $KUBECONFIG, then ~/.kube/config.
Result<ClientConfig> load_client_config(const std::string& kubeconfig_path);

// Standard base64 (with or without padding); error on other characters.
Result<std::string> base64_decode(const std::string& text);

}  // namespace sonde::kube
