#include "common/kube/resource.h"

#include <nlohmann/json.hpp>

namespace sonde::kube {

std::string collection_path(const ResourceType& type, std::string_view ns) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/";
  path += type.plural;
  return path;
}

std::string object_path(const ResourceType& type, std::string_view ns, std::string_view name,
                        std::string_view subresource) {
  std::string path = collection_path(type, ns);
  path += "/";
  path += name;
  if (!subresource.empty()) {
    path += "/";
    path += subresource;
  }
  return path;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string query_string(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? "?" : "&";
    out += percent_encode(key);
    out += "=";
    out += percent_encode(value);
  }
  return out;
}

namespace {

std::string metadata_string(const Json& object, const char* field) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(field);
  if (it == meta->end() || !it->is_string()) return "";
  return it->get<std::string>();
}

}  // namespace

std::string name_of(const Json& object) {
  return metadata_string(object, "name");
}
std::string namespace_of(const Json& object) {
  return metadata_string(object, "namespace");
}
std::string resource_version_of(const Json& object) {
  return metadata_string(object, "resourceVersion");
}
std::string uid_of(const Json& object) {
  return metadata_string(object, "uid");
}

int64_t generation_of(const Json& object) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return 0;
  auto it = meta->find("generation");
  return it != meta->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

std::string make_key(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string key(ns);
  key += "/";
  key += name;
  return key;
}

std::string key_of(const Json& object) {
  return make_key(namespace_of(object), name_of(object));
}

std::pair<std::string, std::string> split_key(std::string_view key) {
  const auto slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key)};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1))};
}

}  // namespace sonde::kube
