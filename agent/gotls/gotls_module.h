// GoTlsModule: the Go TLS feature's part of the agent's start (FeatureModule): its flags
// (--go-tls-perform-ret, --max-go-tls-binaries, --go-tls-keep-probes-seconds), its doctor checks
// (gotls_doctor.cpp: whether its RET probes could be performed in BPF here, and whether it follows
// HTTP/2 framing) and its load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "agent/gotls/gotls_feature.h"
#include "agent/gotls/uprobe_budget.h"
#include "agent/runtime/agent_runtime.h"
#include "agent/runtime/feature_module.h"

namespace sonde::agent {

class GoTlsModule final : public FeatureModule {
 public:
  void add_flags(CLI::App& app, bool in_cluster) override;
  // Asks the running kernel's verifier (loads no program that stays).
  std::vector<Check> node_checks() const override;
  // Its Go TLS plan: the Go version, where crypto/tls is, the probe sites or why none.
  bool explains_binaries() const override { return true; }
  Status explain_binary(const std::string& path, std::string& text,
                        nlohmann::json& json) const override;

  // The feature, bounded as the flags say. In-cluster, it counts in the kernel only the cgroups
  // of selected processes (a container is what a policy selects; standalone targets may pick
  // one process of a cgroup).
  Result<std::unique_ptr<GoTlsFeature>> load(const RuntimeServices& s, const AgentMode& mode) const;

 private:
  bool perform_ret_ = false;
  size_t max_binaries_ = kDefaultMaxGoTlsBinaries;
  uint64_t keep_probes_seconds_ = kDefaultGoTlsKeepProbesSeconds;
};

}  // namespace sonde::agent
