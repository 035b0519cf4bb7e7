#include "agent/cluster/node_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <map>
#include <optional>

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

constexpr auto kNodeUidRetry = std::chrono::minutes(5);

// Write attempts per put() when the object keeps changing under us (409) or vanishes (404).
constexpr int kMaxWriteAttempts = 5;

// Messages carry paths from processes: valid UTF-8 (the report is JSON), cut at a character.
std::string bounded(const std::string& message) {
  return valid_utf8(message, crd::kMaxProblemMessage);
}

// Adds one container to its reason's problem: counted, and the example if it is the first (its
// namespace named for a cluster policy; a namespaced policy's pods are in its namespace).
void add_problem(std::map<std::string, crd::PolicyProblem>& problems, const PolicyState& policy,
                 const std::string& reason, const SelectedContainer& c,
                 const std::string& message) {
  auto [it, inserted] = problems.try_emplace(reason);
  if (inserted) {
    it->second = {reason,
                  0,
                  c.pod,
                  c.container,
                  bounded(message),
                  policy.id.kind == crd::PolicyKind::kCluster ? c.ns : ""};
  }
  ++it->second.count;
}

// The problem of a container none of whose processes has a requested instrumentation live,
// if any: the kernel refusing the probes outranks a policy's limit, which outranks its overhead
// budget (the probes were detached), which outranks missing symbols.
void add_container_problem(std::map<std::string, crd::PolicyProblem>& problems,
                           const PolicyState& policy, const SelectedContainer& c,
                           const std::vector<const ProcessOutcome*>& procs) {
  const ProcessOutcome* symbols = nullptr;
  const ProcessOutcome* kernel = nullptr;
  const ProcessOutcome* limit = nullptr;
  const ProcessOutcome* overhead = nullptr;
  for (const ProcessOutcome* o : procs) {
    for (const auto& kind : instrumentation_kinds()) {
      if (!policy.instrumentations[kind.id]) continue;
      const State s = o->states[kind.id];
      if (s == State::kFailed && !kernel) kernel = o;
      if (s == State::kLimitExceeded && !limit) limit = o;
      if (s == State::kOverheadExceeded && !overhead) overhead = o;
      if (s == State::kSymbolsNotFound && !symbols) symbols = o;
    }
  }
  if (kernel) {
    add_problem(problems, policy, "KernelUnsupported", c, kernel->message);
  } else if (limit) {
    add_problem(problems, policy, "LimitExceeded", c, limit->message);
  } else if (overhead) {
    add_problem(problems, policy, "OverheadExceeded", c, overhead->message);
  } else if (symbols) {
    add_problem(problems, policy, "SymbolsNotFound", c, symbols->message);
  }
}

}  // namespace

std::vector<crd::PolicyEntry> build_policy_reports(const std::vector<PolicyState>& policies,
                                                   const std::vector<ProcessOutcome>& outcomes) {
  std::map<std::string, std::vector<const ProcessOutcome*>> by_container;
  for (const auto& o : outcomes) {
    if (!o.container_id.empty()) by_container[o.container_id].push_back(&o);
  }

  std::vector<crd::PolicyEntry> reports;
  reports.reserve(policies.size());
  for (const auto& policy : policies) {
    crd::PolicyEntry r{.uid = policy.id.uid,
                       .observed_generation = policy.id.generation,
                       .matched_pods = static_cast<int64_t>(policy.matched_pods.size())};
    std::map<std::string, crd::PolicyProblem> problems;
    if (!policy.invalid.empty()) {
      problems[crd::kInvalidSpec] = {crd::kInvalidSpec, 1, "", "", bounded(policy.invalid)};
    }
    for (const auto& c : policy.over_limit) {
      add_problem(problems, policy, "LimitExceeded", c,
                  "not instrumented: the policy selects more containers on this node than "
                  "limits.maxTargetsPerNode (" +
                      std::to_string(policy.max_targets_per_node) + ")");
    }
    // pods (namespace/name) with a container within the limit
    std::map<std::string, bool> pod_instrumented;
    for (const auto& c : policy.containers) {
      static const std::vector<const ProcessOutcome*> kNone;
      auto it = c.container_id.empty() ? by_container.end() : by_container.find(c.container_id);
      const auto& procs = it == by_container.end() ? kNone : it->second;
      bool live = false;
      for (const ProcessOutcome* o : procs) {
        auto live_for = [&](Instrumentation kind) {
          return policy.instrumentations[kind] && o->states[kind] == State::kInstrumented;
        };
        if (live_for(Instrumentation::kNodejsEventLoop)) ++r.nodejs_processes;
        for (const auto& kind : instrumentation_kinds()) live = live || live_for(kind.id);
      }
      if (!live) add_container_problem(problems, policy, c, procs);
      auto [pod, inserted] = pod_instrumented.try_emplace(c.ns + "/" + c.pod, live);
      if (!inserted) pod->second = pod->second && live;
    }
    for (const auto& [pod, ok] : pod_instrumented) r.instrumented_pods += ok ? 1 : 0;
    for (auto& [reason, problem] : problems) r.problems.push_back(std::move(problem));
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

crd::NodeReportStatus report_status(const AgentFacts& facts,
                                    std::vector<crd::PolicyEntry> entries) {
  crd::NodeReportStatus status{.agent_version = facts.agent_version,
                               .kernel_release = facts.kernel_release,
                               .btf = facts.btf,
                               .policies = std::move(entries)};
  crd::bound_report(status);
  return status;
}

NodeReportWriter::NodeReportWriter(kube::ApiClient& client, std::string node, std::string ns,
                                   StatusSource source, ReportWriterOptions options,
                                   const Clock& clock)
    : client_(client),
      node_(std::move(node)),
      ns_(std::move(ns)),
      source_(std::move(source)),
      options_(options),
      clock_(clock) {}

void NodeReportWriter::learn_node_uid() {
  // Asked again at most every few minutes: an agent that may not read Nodes must not add a
  // GET to every Lease renewal.
  const auto now = clock_.now();
  if (!node_uid_.empty() || (node_uid_asked_ && now - node_uid_asked_at_ < kNodeUidRetry)) return;
  node_uid_asked_ = true;
  node_uid_asked_at_ = now;
  auto node = client_.get(kNodes, "", node_);
  if (node.ok()) {
    node_uid_ = kube::uid_of(*node);
    return;
  }
  // Without the uid the report simply has no owner: it outlives a deleted node until the
  // next agent on a node of that name rewrites it.
  if (!node_uid_warned_) {
    log::warn("cannot read this node: the report and Lease get no ownerReference",
              {{"node", node_}, {"error", node.error().message()}});
    node_uid_warned_ = true;
  }
}

Status NodeReportWriter::put(const kube::ResourceType& type, const std::string& name, Json object,
                             std::string& rv) {
  const std::string what = type.plural + " " + ns_ + "/" + name;
  for (int attempt = 0; attempt < kMaxWriteAttempts; ++attempt) {
    if (rv.empty()) {
      auto current = client_.get(type, ns_, name);
      if (current.ok()) {
        rv = kube::resource_version_of(*current);
      } else if (kube::is_not_found(current.error())) {
        object["metadata"].erase("resourceVersion");
        auto created = client_.create(type, ns_, object);
        if (created.ok()) {
          rv = kube::resource_version_of(*created);
          return ok_status();
        }
        if (kube::is_conflict(created.error())) continue;  // created meanwhile: read it
        return created.error().wrap("create " + what);
      } else {
        return current.error().wrap("read " + what);
      }
    }
    object["metadata"]["resourceVersion"] = rv;
    auto replaced = client_.replace(type, ns_, name, object);
    if (replaced.ok()) {
      rv = kube::resource_version_of(*replaced);
      return ok_status();
    }
    // 409: someone else wrote it since we read it; 404: it was deleted. Read again.
    if (!kube::is_conflict(replaced.error()) && !kube::is_not_found(replaced.error())) {
      return replaced.error().wrap("replace " + what);
    }
    rv.clear();
  }
  return Error(what + " changed under every one of " + std::to_string(kMaxWriteAttempts) +
               " writes");
}

Status NodeReportWriter::write(const crd::NodeReportStatus& status) {
  learn_node_uid();
  RETURN_IF_ERROR(put(kube::kProfilingNodeReports, node_,
                      crd::report_object(node_, ns_, node_uid_, status), report_rv_));
  ++writes_;
  return ok_status();
}

Status NodeReportWriter::renew_lease() {
  learn_node_uid();
  RETURN_IF_ERROR(
      put(kube::kLeases, crd::node_lease_name(node_),
          crd::node_lease_object(node_, ns_, node_uid_, options_.lease_duration, clock_.wall_now()),
          lease_rv_));
  ++lease_renewals_;
  return ok_status();
}

void NodeReportWriter::report_health(HealthRegistry& health) {
  health_ = &health;
  loop_check_ = health.add("node-report-writer", HealthRegistry::Probe::kLiveness, kLoopStaleAfter);
  lease_check_ = health.add("node-lease", HealthRegistry::Probe::kReadiness,
                            options_.lease_duration, "Lease not renewed");
}

void NodeReportWriter::run(kube::StopSignal& stop) {
  // One backoff per object: a report the server refuses must not starve the Lease.
  struct Task {
    kube::Backoff backoff{{std::chrono::seconds(1), std::chrono::seconds(30), 2.0, 1.0}};
    SteadyTime next_attempt{};
    bool retry(SteadyTime now, const Status& st, const char* what) {
      if (st.ok()) {
        backoff.reset();
        return true;
      }
      auto delay = backoff.next();
      log::warn(
          std::string("cannot write the ") + what + "; retrying",
          {{"error", st.error().message()},
           {"retry_in_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
      next_attempt = now + delay;
      return false;
    }
  };
  Task report, lease;
  std::optional<crd::NodeReportStatus> last;  // the status last written
  SteadyTime last_write{};
  SteadyTime last_renewal{};
  bool renewed = false;
  while (!stop.stopped()) {
    if (health_) health_->beat(loop_check_);
    const auto now = clock_.now();
    if ((!renewed || now - last_renewal >= options_.renew_interval) && now >= lease.next_attempt) {
      if (lease.retry(now, renew_lease(), "node Lease")) {
        last_renewal = now;
        renewed = true;
        if (health_) health_->beat(lease_check_);
      }
    }
    crd::NodeReportStatus status = source_();
    const bool due = !last || (status != *last && now - last_write >= options_.min_interval);
    if (due && now >= report.next_attempt) {
      if (report.retry(now, write(status), "node report")) {
        last = std::move(status);
        last_write = now;
      }
    }
    if (!stop.sleep_for(clock_, options_.poll)) break;
  }
}

}  // namespace sonde::agent
