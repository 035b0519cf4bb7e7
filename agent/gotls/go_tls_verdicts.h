// GoTlsVerdicts: the Go TLS plan (verdict and probe sites, go_tls_plan.h) of every binary
// TlsMonitor has planned, by BinaryIdentity::to_string(), so that a binary is planned, logged and
// exported once and never planned again while it is remembered.
//
// Bounded: at kMaxVerdicts binaries, remembering one more forgets one of them (whichever the hash
// table lists first, not necessarily the oldest); a binary forgotten and seen again is planned
// again. A node runs far fewer distinct Go binaries; the bound is against a churn of fresh builds.
//
// A remembered verdict changes in two ways only: replace() (the kernel refused the binary's
// uprobes for lack of privilege, which does not change while the agent runs), and LimitExceeded,
// which it says while the node's uprobe budget (uprobe_budget.h) leaves the binary's processes
// out, until one of them is instrumented.
//
// Thread-safety: none; TlsMonitor uses it under its mutex. Cost: a hash lookup per call; find()
// copies the plan (a few dozen probe sites).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/gotls/go_tls_plan.h"

namespace sonde::agent {

class GoTlsVerdicts {
 public:
  static constexpr size_t kMaxVerdicts = 4096;

  std::optional<GoTlsPlan> find(const std::string& key) const;
  // Remembers `plan` for `key`, unless a plan is remembered for it already (another thread
  // planned the binary meanwhile): the first one stays, with what happened to it since.
  void remember(const std::string& key, const GoTlsPlan& plan);
  // Remembers `plan` for `key` in place of the one remembered, if any.
  void replace(const std::string& key, const GoTlsPlan& plan);
  // The node's budget leaves the binary `key` out, for `why`: its verdict says LimitExceeded.
  // True when it did not say so already (the caller logs it, once per binary then); false for a
  // binary not remembered, which gets no verdict.
  bool exceed_limit(const std::string& key, const std::string& why);
  // A process of the binary `key` is instrumented: its verdict says LimitExceeded no more.
  void within_limit(const std::string& key);

  // The verdicts of the binaries remembered that are reported (go_tls_plan.h: Go TLS users).
  std::vector<GoTlsVerdict> reported() const;
  size_t size() const { return plans_.size(); }

 private:
  std::unordered_map<std::string, GoTlsPlan> plans_;
};

}  // namespace sonde::agent
