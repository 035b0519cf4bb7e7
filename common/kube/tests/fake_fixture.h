// Shared fixture pieces for tests that run against the fake API server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/kube/api_client.h"
#include "common/kube/reflector.h"
#include "common/kube/testing/fake_apiserver_process.h"

namespace sonde::kube::testing {

inline const ResourceType kWidgets{"test.sonde.dev", "v1", "widgets", true};
inline const ResourceType kGadgets{"test.sonde.dev", "v1", "gadgets", true};

// Polls `pred` every 5 ms for up to `timeout`.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

inline Json widget(const std::string& ns, const std::string& name, int value) {
  return {{"apiVersion", "test.sonde.dev/v1"},
          {"kind", "Widget"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"value", value}, {"padding", std::string(300, 'p')}}}};
}

// A ReflectorSink that is strict about what a correct reflector must never do: apply the same
// object version twice. It keeps the state it was given so tests compare it with the server.
class RecordingSink : public ReflectorSink {
 public:
  void replace(std::vector<Json> items, const std::string&) override {
    std::lock_guard lock(mu_);
    ++replaces_;
    state_.clear();
    for (auto& item : items) {
      // The key first: json's by-value operator= would move `item` before key_of reads it.
      const std::string key = key_of(item);
      state_[key] = std::move(item);
    }
  }
  void apply(WatchEvent::Type type, Json object) override {
    std::lock_guard lock(mu_);
    const std::string key = key_of(object);
    const std::string rv = resource_version_of(object);
    if (!applied_.insert(key + "@" + rv).second) ++duplicates_;
    ++applies_;
    if (type == WatchEvent::Type::kDeleted) {
      state_.erase(key);
    } else {
      state_[key] = std::move(object);  // key computed above, before the move
    }
  }

  int replaces() const {
    std::lock_guard lock(mu_);
    return replaces_;
  }
  int applies() const {
    std::lock_guard lock(mu_);
    return applies_;
  }
  int duplicates() const {
    std::lock_guard lock(mu_);
    return duplicates_;
  }
  bool has(const std::string& key) const {
    std::lock_guard lock(mu_);
    return state_.count(key) != 0;
  }
  int times_applied(const std::string& key, const std::string& rv) const {
    std::lock_guard lock(mu_);
    return static_cast<int>(applied_.count(key + "@" + rv));
  }
  // key -> resourceVersion of what the sink holds.
  std::map<std::string, std::string> versions() const {
    std::lock_guard lock(mu_);
    std::map<std::string, std::string> out;
    for (const auto& [key, object] : state_) out[key] = resource_version_of(object);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Json> state_;
  std::set<std::string> applied_;
  int replaces_ = 0;
  int applies_ = 0;
  int duplicates_ = 0;
};

// key -> resourceVersion of every widget on the server.
inline std::map<std::string, std::string> server_versions(ApiClient& client,
                                                          const ResourceType& type) {
  auto page = client.list(type, "", {});
  EXPECT_TRUE(page.ok());
  std::map<std::string, std::string> out;
  if (page.ok()) {
    for (const auto& item : page->items) out[key_of(item)] = resource_version_of(item);
  }
  return out;
}

// Requests in the log matching method, path and (when given) the watch flag.
inline std::vector<Json> requests_to(FakeApiServer& fake, const std::string& path, bool watch) {
  std::vector<Json> out;
  for (const auto& r : fake.requests()) {
    if (r["path"] != path || r["method"] != "GET") continue;
    const bool is_watch = r["query"].value("watch", "") == "true";
    if (is_watch == watch) out.push_back(r);
  }
  return out;
}

inline ApiClientOptions test_client_options(int attempts = 1) {
  ApiClientOptions options;
  options.user_agent = "sonde-test";
  options.request_timeout = std::chrono::seconds(5);
  options.retry.max_attempts = attempts;
  options.qps = 0;  // tests poll the server; the rate limit has its own test
  options.retry.backoff = {std::chrono::milliseconds(50), std::chrono::milliseconds(400), 2.0, 0.5};
  return options;
}

inline ReflectorOptions test_reflector_options() {
  ReflectorOptions options;
  options.min_watch_timeout = std::chrono::seconds(30);
  options.backoff = {std::chrono::milliseconds(100), std::chrono::seconds(1), 2.0, 0.5};
  return options;
}

}  // namespace sonde::kube::testing
