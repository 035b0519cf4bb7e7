#include "agent/cluster/node_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <map>

#include "common/kube/backoff.h"
#include "common/kube/sonde_resources.h"
#include "common/log.h"
#include "common/text.h"
#include "common/version.h"

namespace sonde::agent {
namespace {

using kube::Json;
using State = ProcessOutcome::State;

const kube::ResourceType kNodes{"", "v1", "nodes", false};

// Write attempts per write() when the report keeps changing under us (409) or vanishes (404).
constexpr int kMaxWriteAttempts = 5;

// Messages carry paths from processes: valid UTF-8 (the report is JSON), cut at a character.
std::string bounded(const std::string& message) {
  return valid_utf8(message, kMaxProblemMessage);
}

// The problem a container none of whose processes has a requested instrumentation live
// reports, if any: the kernel refusing the probes outranks missing symbols.
std::optional<ReportProblem> container_problem(const PolicyState& policy,
                                               const SelectedContainer& c,
                                               const std::vector<const ProcessOutcome*>& procs) {
  const ProcessOutcome* symbols = nullptr;
  const ProcessOutcome* kernel = nullptr;
  for (const ProcessOutcome* o : procs) {
    for (State s : {policy.nodejs_event_loop ? o->nodejs : State::kNotApplicable,
                    policy.go_tls ? o->go_tls : State::kNotApplicable,
                    policy.cpu ? o->cpu : State::kNotApplicable}) {
      if (s == State::kFailed && !kernel) kernel = o;
      if (s == State::kSymbolsNotFound && !symbols) symbols = o;
    }
  }
  if (kernel)
    return ReportProblem{"KernelUnsupported", c.pod, c.container, bounded(kernel->message)};
  if (symbols) {
    return ReportProblem{"SymbolsNotFound", c.pod, c.container, bounded(symbols->message)};
  }
  return std::nullopt;
}

Json without_blocked_seconds(Json status) {
  if (auto it = status.find("policies"); it != status.end() && it->is_array()) {
    for (auto& entry : *it) entry.erase("eventLoopBlockedSecondsTotal");
  }
  return status;
}

}  // namespace

std::vector<PolicyReport> build_policy_reports(
    const std::vector<PolicyState>& policies, const std::vector<ProcessOutcome>& outcomes,
    const std::vector<EventLoopMonitor::Sample>& samples) {
  std::map<std::string, std::vector<const ProcessOutcome*>> by_container;
  for (const auto& o : outcomes) {
    if (!o.container_id.empty()) by_container[o.container_id].push_back(&o);
  }
  std::map<ContainerLabels, double> blocked;
  for (const auto& s : samples) blocked[s.labels] += s.blocked_seconds;

  std::vector<PolicyReport> reports;
  reports.reserve(policies.size());
  for (const auto& policy : policies) {
    PolicyReport r{.ns = policy.ns,
                   .name = policy.name,
                   .uid = policy.uid,
                   .observed_generation = policy.generation,
                   .matched_pods = static_cast<int64_t>(policy.matched_pods.size()),
                   .problems = policy.problems};
    std::map<std::string, bool> pod_instrumented;  // pods with a container within the limit
    for (const auto& c : policy.containers) {
      static const std::vector<const ProcessOutcome*> kNone;
      auto it = c.container_id.empty() ? by_container.end() : by_container.find(c.container_id);
      const auto& procs = it == by_container.end() ? kNone : it->second;
      bool live = false;
      for (const ProcessOutcome* o : procs) {
        const bool nodejs = policy.nodejs_event_loop && o->nodejs == State::kInstrumented;
        if (nodejs) ++r.nodejs_processes;
        live = live || nodejs || (policy.go_tls && o->go_tls == State::kInstrumented) ||
               (policy.cpu && o->cpu == State::kInstrumented);
      }
      if (!live) {
        auto problem = container_problem(policy, c, procs);
        if (problem && r.problems.size() < kMaxProblemsPerPolicy) {
          r.problems.push_back(std::move(*problem));
        }
      }
      auto [pod, inserted] = pod_instrumented.try_emplace(c.pod, live);
      if (!inserted) pod->second = pod->second && live;
      if (policy.nodejs_event_loop) {
        auto b = blocked.find(ContainerLabels{policy.ns, c.pod, c.container});
        if (b != blocked.end()) r.event_loop_blocked_seconds += b->second;
      }
    }
    for (const auto& [pod, ok] : pod_instrumented) r.instrumented_pods += ok ? 1 : 0;
    reports.push_back(std::move(r));
  }
  return reports;
}

AgentFacts read_agent_facts() {
  AgentFacts facts{.agent_version = kVersion};
  struct utsname u {};
  if (uname(&u) == 0) facts.kernel_release = u.release;
  facts.btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
  return facts;
}

Json report_status(const AgentFacts& facts, const std::vector<PolicyReport>& reports) {
  Json policies = Json::array();
  for (const auto& r : reports) {
    Json problems = Json::array();
    for (const auto& p : r.problems) {
      problems.push_back({{"reason", p.reason},
                          {"pod", p.pod},
                          {"container", p.container},
                          {"message", p.message}});
    }
    Json entry = {{"namespace", r.ns},
                  {"name", r.name},
                  {"observedGeneration", r.observed_generation},
                  {"matchedPods", r.matched_pods},
                  {"instrumentedPods", r.instrumented_pods},
                  {"nodejsProcesses", r.nodejs_processes},
                  {"eventLoopBlockedSecondsTotal", r.event_loop_blocked_seconds},
                  {"problems", std::move(problems)}};
    if (!r.uid.empty()) entry["uid"] = r.uid;
    policies.push_back(std::move(entry));
  }
  return {{"agentVersion", facts.agent_version},
          {"kernel", {{"release", facts.kernel_release}, {"btf", facts.btf}}},
          {"policies", std::move(policies)}};
}

Json report_object(const std::string& node, const std::string& ns, const std::string& node_uid,
                   Json status) {
  Json metadata = {{"name", node}, {"namespace", ns}};
  if (!node_uid.empty()) {
    metadata["ownerReferences"] =
        Json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node_uid}}});
  }
  return {{"apiVersion", kube::kProfilingNodeReports.api_version()},
          {"kind", "ProfilingNodeReport"},
          {"metadata", std::move(metadata)},
          {"spec", {{"nodeName", node}}},
          {"status", std::move(status)}};
}

std::string rfc3339(kube::WallTime time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  (void)std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

NodeReportWriter::NodeReportWriter(kube::ApiClient& client, std::string node, std::string ns,
                                   StatusSource source, ReportWriterOptions options,
                                   const kube::Clock& clock)
    : client_(client),
      node_(std::move(node)),
      ns_(std::move(ns)),
      source_(std::move(source)),
      options_(options),
      clock_(clock) {}

void NodeReportWriter::learn_node_uid() {
  auto node = client_.get(kNodes, "", node_);
  if (node.ok()) {
    node_uid_ = kube::uid_of(*node);
    return;
  }
  // Without the uid the report simply has no owner: it outlives a deleted node until the
  // next agent on a node of that name rewrites it.
  if (!node_uid_warned_) {
    log::warn("cannot read this node: the report gets no ownerReference",
              {{"node", node_}, {"error", node.error().message()}});
    node_uid_warned_ = true;
  }
}

Status NodeReportWriter::write(const Json& status) {
  if (node_uid_.empty()) learn_node_uid();
  Json object = report_object(node_, ns_, node_uid_, status);
  object["status"]["heartbeatTime"] = rfc3339(clock_.wall_now());
  for (int attempt = 0; attempt < kMaxWriteAttempts; ++attempt) {
    if (resource_version_.empty()) {
      auto current = client_.get(kube::kProfilingNodeReports, ns_, node_);
      if (current.ok()) {
        resource_version_ = kube::resource_version_of(*current);
      } else if (kube::is_not_found(current.error())) {
        object["metadata"].erase("resourceVersion");
        auto created = client_.create(kube::kProfilingNodeReports, ns_, object);
        if (created.ok()) {
          resource_version_ = kube::resource_version_of(*created);
          ++writes_;
          return ok_status();
        }
        if (kube::is_conflict(created.error())) continue;  // created meanwhile: read it
        return created.error().wrap("create node report " + ns_ + "/" + node_);
      } else {
        return current.error().wrap("read node report " + ns_ + "/" + node_);
      }
    }
    object["metadata"]["resourceVersion"] = resource_version_;
    auto replaced = client_.replace(kube::kProfilingNodeReports, ns_, node_, object);
    if (replaced.ok()) {
      resource_version_ = kube::resource_version_of(*replaced);
      ++writes_;
      return ok_status();
    }
    // 409: someone else wrote it since we read it; 404: it was deleted. Read again.
    if (!kube::is_conflict(replaced.error()) && !kube::is_not_found(replaced.error())) {
      return replaced.error().wrap("replace node report " + ns_ + "/" + node_);
    }
    resource_version_.clear();
  }
  return Error("node report " + ns_ + "/" + node_ + " changed under every one of " +
               std::to_string(kMaxWriteAttempts) + " writes");
}

void NodeReportWriter::run(kube::StopSignal& stop) {
  kube::Backoff backoff({std::chrono::seconds(1), std::chrono::seconds(30), 2.0, 1.0});
  Json last;  // the status last written, without heartbeat; null before the first write
  kube::SteadyTime last_write{};
  kube::SteadyTime next_attempt = clock_.now();
  while (!stop.stopped()) {
    Json status = source_();
    const auto now = clock_.now();
    bool due = last.is_null() || now - last_write >= options_.heartbeat;
    if (!due && status != last) {
      due = without_blocked_seconds(status) != without_blocked_seconds(last) ||
            now - last_write >= options_.blocked_seconds_refresh;
    }
    if (due && now >= next_attempt) {
      if (auto st = write(status); st.ok()) {
        last = std::move(status);
        last_write = now;
        backoff.reset();
      } else {
        auto delay = backoff.next();
        log::warn("cannot write the node report; retrying",
                  {{"error", st.error().message()},
                   {"retry_in_ms",
                    std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
        next_attempt = now + delay;
      }
    }
    if (!stop.sleep_for(clock_, options_.poll)) break;
  }
}

}  // namespace sonde::agent
