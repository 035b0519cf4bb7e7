#include "agent/assembly/agent_parts.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "agent/cpu/cpu_module.h"
#include "agent/gotls/gotls_module.h"
#include "agent/nodejs/nodejs_module.h"
#include "agent/nodejs_threadpool/nodejs_threadpool_feature.h"
#include "agent/procevents/process_events.h"
#include "agent/symbolize/symbolizer_cache.h"

namespace sonde::agent {

struct AgentFeatures::Modules {
  NodejsModule nodejs;
  GoTlsModule gotls;
  CpuModule cpu;

  // In start order.
  std::vector<FeatureModule*> all() { return {&nodejs, &gotls, &cpu}; }
  std::vector<const FeatureModule*> all() const { return {&nodejs, &gotls, &cpu}; }
};

AgentFeatures::AgentFeatures() : modules_(std::make_shared<Modules>()) {}

void AgentFeatures::add_flags(CLI::App& app, bool in_cluster) {
  for (FeatureModule* m : modules_->all()) m->add_flags(app, in_cluster);
}

Status AgentFeatures::check_flags() const {
  for (const FeatureModule* m : modules_->all()) RETURN_IF_ERROR(m->check_flags());
  return ok_status();
}

std::vector<NodeChecks> AgentFeatures::node_checks() const {
  std::vector<NodeChecks> out;
  for (const FeatureModule* m : modules_->all()) {
    out.emplace_back([m] { return m->node_checks(); });
  }
  return out;
}

Status AgentFeatures::explain_binary(const std::string& path, std::string& text,
                                     nlohmann::json& json) const {
  text.clear();
  std::vector<nlohmann::json> objects;
  for (const FeatureModule* m : modules_->all()) {
    if (!m->explains_binaries()) continue;
    std::string lines;
    RETURN_IF_ERROR(m->explain_binary(path, lines, objects.emplace_back()));
    text += lines;
  }
  json = objects.size() == 1 ? std::move(objects.front()) : nlohmann::json(std::move(objects));
  return ok_status();
}

PartsFactory AgentFeatures::parts(AgentMode mode) const {
  return [m = std::shared_ptr<const Modules>(modules_),
          mode = std::move(mode)](const RuntimeServices& s) -> Result<RuntimeParts> {
    RuntimeParts parts;
    ASSIGN_OR_RETURN(parts.events, ProcessEventSource::start(s.on_event));
    NodejsFeature* nodejs = nullptr;  // its wait hook and loops map
    // One copy of each binary's symbol tables for the stall recorder and the CPU profiler.
    auto binaries = std::make_shared<symbolize::SymbolizerCache>();
    if (mode.loads(Instrumentation::kNodejsEventLoop)) {
      ASSIGN_OR_RETURN(auto f, m->nodejs.load(s, mode, binaries));
      nodejs = f.get();
      parts.features.push_back(std::move(f));
    }
    if (mode.loads(Instrumentation::kGoTls)) {
      ASSIGN_OR_RETURN(auto f, m->gotls.load(s, mode));
      parts.features.push_back(std::move(f));
    }
    if (mode.loads(Instrumentation::kCpu)) {
      ASSIGN_OR_RETURN(auto f,
                       m->cpu.load(s, mode, binaries, nodejs ? nodejs->loops_map_fd() : -1));
      parts.features.push_back(std::move(f));
    }
    if (mode.loads(Instrumentation::kNodejsThreadPool)) {
      parts.features.push_back(
          std::make_unique<NodejsThreadPoolFeature>(s.cache, s.proc, s.series_grace_ns(), s.node));
    }
    // sonde_agent_info: the event-loop wait hook and its cost to processes not selected.
    parts.info_labels = {{"wait_source", nodejs ? nodejs->wait_source() : "none"},
                         {"unselected_cost", nodejs ? nodejs->wait_source_cost() : "none"}};
    return parts;
  };
}

}  // namespace sonde::agent
