#include "common/kube/client_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/files.h"

namespace sonde::kube {
namespace {

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns
// its `field` map; nullopt when absent.
std::optional<YAML::Node> find_named(const YAML::Node& list, const std::string& name,
                                     const char* field) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& entry : list) {
    if (entry["name"] && entry["name"].as<std::string>() == name && entry[field] &&
        entry[field].IsMap()) {
      return entry[field];
    }
  }
  return std::nullopt;
}

std::string scalar(const YAML::Node& node, const char* key) {
  if (!node || !node[key] || !node[key].IsScalar()) return "";
  return node[key].as<std::string>();
}

// Relative file paths in a kubeconfig are relative to the kubeconfig's folder.
std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(base_dir) / path).string();
}

Result<std::string> data_or_file(const YAML::Node& node, const char* data_key, const char* file_key,
                                 const std::string& base_dir) {
  if (const std::string data = scalar(node, data_key); !data.empty()) {
    auto decoded = base64_decode(data);
    if (!decoded.ok()) return decoded.error().wrap(data_key);
    return decoded;
  }
  if (const std::string file = scalar(node, file_key); !file.empty()) {
    return read_file(resolve(base_dir, file));
  }
  return std::string();
}

}  // namespace

Result<std::string> base64_decode(const std::string& text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=' || c == '\n' || c == '\r') {
      continue;
    } else {
      return Error("invalid base64 character");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

Result<ClientConfig> in_cluster_config(const std::string& service_host,
                                       const std::string& service_port, const std::string& sa_dir) {
  if (service_host.empty()) {
    return Error("not running in a cluster: KUBERNETES_SERVICE_HOST is not set");
  }
  ClientConfig config;
  const std::string host =
      service_host.find(':') != std::string::npos ? "[" + service_host + "]" : service_host;
  config.server = "https://" + host + ":" + (service_port.empty() ? "443" : service_port);
  config.bearer_token_file = sa_dir + "/token";
  ASSIGN_OR_RETURN(std::string token, read_file(config.bearer_token_file));
  config.bearer_token = trim(token);
  ASSIGN_OR_RETURN(config.ca_pem, read_file(sa_dir + "/ca.crt"));
  auto ns = read_file(sa_dir + "/namespace");
  config.default_namespace = ns.ok() ? trim(*ns) : "default";
  return config;
}

namespace {

// The configuration in a parsed kubeconfig; may throw YAML::Exception on shapes it does not
// expect (a subscript of a scalar, a map where a string belongs).
Result<ClientConfig> config_from_yaml(const YAML::Node& root, const std::string& path,
                                      const std::string& context) {
  const std::string context_name = context.empty() ? scalar(root, "current-context") : context;
  if (context_name.empty()) return Error("kubeconfig " + path + ": no current-context set");
  const auto found_ctx = find_named(root["contexts"], context_name, "context");
  if (!found_ctx) {
    return Error("kubeconfig " + path + ": context \"" + context_name + "\" not found");
  }
  const YAML::Node& ctx = *found_ctx;
  const auto found_cluster = find_named(root["clusters"], scalar(ctx, "cluster"), "cluster");
  if (!found_cluster) {
    return Error("kubeconfig " + path + ": cluster \"" + scalar(ctx, "cluster") + "\" not found");
  }
  const YAML::Node& cluster = *found_cluster;
  const YAML::Node user =
      find_named(root["users"], scalar(ctx, "user"), "user").value_or(YAML::Node());
  const std::string base_dir = std::filesystem::path(path).parent_path().string();

  ClientConfig config;
  config.server = scalar(cluster, "server");
  if (config.server.empty()) return Error("kubeconfig " + path + ": cluster has no server");
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  config.insecure_skip_tls_verify = scalar(cluster, "insecure-skip-tls-verify") == "true";
  config.default_namespace = scalar(ctx, "namespace");
  if (config.default_namespace.empty()) config.default_namespace = "default";
  auto ca = data_or_file(cluster, "certificate-authority-data", "certificate-authority", base_dir);
  if (!ca.ok()) return ca.error().wrap("kubeconfig " + path);
  config.ca_pem = std::move(*ca);
  if (user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return Error("kubeconfig " + path + ": user \"" + scalar(ctx, "user") +
                   "\" uses an exec or auth-provider plugin, which sonde does not run; use a "
                   "token or client certificate");
    }
    config.bearer_token = scalar(user, "token");
    config.bearer_token_file = resolve(base_dir, scalar(user, "tokenFile"));
    auto cert = data_or_file(user, "client-certificate-data", "client-certificate", base_dir);
    if (!cert.ok()) return cert.error().wrap("kubeconfig " + path);
    config.client_cert_pem = std::move(*cert);
    auto key = data_or_file(user, "client-key-data", "client-key", base_dir);
    if (!key.ok()) return key.error().wrap("kubeconfig " + path);
    config.client_key_pem = std::move(*key);
  }
  return config;
}

}  // namespace

Result<ClientConfig> kubeconfig_config(const std::string& path, const std::string& context) {
  ASSIGN_OR_RETURN(std::string text, read_file(path));
  // yaml-cpp reports every shape mismatch with an exception: a malformed kubeconfig is an
  // error naming the file, never an uncaught exception.
  try {
    return config_from_yaml(YAML::Load(text), path, context);
  } catch (const YAML::Exception& e) {
    return Error("kubeconfig " + path + ": " + e.what());
  }
}

Result<ClientConfig> load_client_config(const std::string& kubeconfig_path) {
  if (!kubeconfig_path.empty()) return kubeconfig_config(kubeconfig_path);
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (host != nullptr && *host != '\0') {
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    return in_cluster_config(host, port != nullptr ? port : "");
  }
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr && *env != '\0') {
    std::string first(env);
    first = first.substr(0, first.find(':'));
    return kubeconfig_config(first);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    return kubeconfig_config(std::string(home) + "/.kube/config");
  }
  return Error(
      "no Kubernetes configuration: not in a cluster, --kubeconfig not given, "
      "$KUBECONFIG and $HOME unset");
}

}  // namespace sonde::kube
