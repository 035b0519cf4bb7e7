#include "agent/gotls/tls_admissions.h"

#include "agent/discovery/candidate.h"
#include "common/log.h"

namespace sonde::agent {

void TlsAdmissions::filter_by_cgroup() {
  filtering_ = true;
  kernel_.filter_by_cgroup(true);
  log::info("Go TLS counts only selected containers' cgroups");
}

void TlsAdmissions::admit(const ProcessInfo& process, const ContainerLabels& labels) {
  std::optional<uint64_t> cgroup;
  if (filtering_) {
    auto id = kernel_.cgroup_of(process.pid, process.start_time);
    if (id.ok()) {
      cgroup = *id;
    } else if (is_gone(id.error())) {
      return;
    } else {
      stop_filtering(id.error().message());
    }
  }
  auto it = admitted_.find(process.pid);
  if (it != admitted_.end()) {
    const Admission& a = it->second;
    if (a.start_time == process.start_time && a.cgroup_id == cgroup && a.labels == labels) return;
    // Another process under that pid, moved to another cgroup, or selected anew.
    unadmit(process.pid);
  }
  if (cgroup && admitted_cgroups_[*cgroup]++ == 0) {
    if (Status st = kernel_.allow_cgroup(*cgroup); !st.ok()) {
      admitted_cgroups_.erase(*cgroup);
      stop_filtering(st.error().message());
      cgroup.reset();
    }
  }
  admitted_[process.pid] = {process.start_time, labels, cgroup};
}

void TlsAdmissions::unadmit(pid_t pid) {
  auto it = admitted_.find(pid);
  if (it == admitted_.end()) return;
  if (it->second.cgroup_id) {
    auto c = admitted_cgroups_.find(*it->second.cgroup_id);
    if (c != admitted_cgroups_.end() && --c->second == 0) {
      kernel_.disallow_cgroup(c->first);
      admitted_cgroups_.erase(c);
    }
  }
  admitted_.erase(it);
}

const TlsAdmissions::Admission* TlsAdmissions::find(pid_t pid) const {
  auto it = admitted_.find(pid);
  return it == admitted_.end() ? nullptr : &it->second;
}

void TlsAdmissions::stop_filtering(const std::string& why) {
  log::warn("Go TLS cgroup filter off: counting every process of instrumented binaries",
            {{"reason", why}});
  kernel_.filter_by_cgroup(false);
  for (const auto& [id, n] : admitted_cgroups_) kernel_.disallow_cgroup(id);
  admitted_cgroups_.clear();
  for (auto& [pid, a] : admitted_) a.cgroup_id.reset();
  filtering_ = false;
}

}  // namespace sonde::agent
