// Resource types, URL paths and object accessors shared by the API client, reflector and
// informer. Objects are nlohmann::json as they come off the wire: sonde reads the few fields
// it needs rather than mapping every Kubernetes type. resourceVersion is an opaque string
// everywhere: compared for equality only, never parsed or ordered.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sonde::kube {

using Json = nlohmann::json;

// A group/version/resource, e.g. {"", "v1", "pods", true} or
// {"sonde.dev", "v1alpha1", "profilingpolicies", true}.
struct ResourceType {
  std::string group;  // empty for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

inline const ResourceType kPods{"", "v1", "pods", true};
inline const ResourceType kNamespaces{"", "v1", "namespaces", false};
inline const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", true};
inline const ResourceType kEvents{"", "v1", "events", true};

// "/api/v1/namespaces/ns/pods" (namespace empty: across all namespaces, or cluster-scoped).
std::string collection_path(const ResourceType& type, std::string_view ns);
// ".../pods/name" or ".../pods/name/status".
std::string object_path(const ResourceType& type, std::string_view ns, std::string_view name,
                        std::string_view subresource = {});

// "?a=b&c=d" with values percent-encoded; empty parameters skipped; "" when none remain.
std::string query_string(const std::vector<std::pair<std::string, std::string>>& params);
std::string percent_encode(std::string_view text);

// Accessors that tolerate missing fields (they return "" / 0).
std::string name_of(const Json& object);
std::string namespace_of(const Json& object);
std::string resource_version_of(const Json& object);
std::string uid_of(const Json& object);
int64_t generation_of(const Json& object);
// "namespace/name", or "name" for cluster-scoped objects: the informer and queue key.
std::string key_of(const Json& object);
std::string make_key(std::string_view ns, std::string_view name);
// Splits a key back into namespace ("" when cluster-scoped) and name.
std::pair<std::string, std::string> split_key(std::string_view key);

}  // namespace sonde::kube
