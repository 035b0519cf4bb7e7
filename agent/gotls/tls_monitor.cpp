#include "agent/gotls/tls_monitor.h"

#include <elf.h>

#include <algorithm>
#include <cerrno>

#include "agent/gotls/go_build_info.h"
#include "agent/symbols/elf_file.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

enum NameIndex { kWrite = 0, kRead = 1 };
const std::vector<std::string> kNames = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};
// Verdicts kept for Go binaries; beyond this the oldest are forgotten (and recomputed if seen).
constexpr size_t kMaxVerdicts = 4096;

constexpr const char* kStripped = "stripped Go binary: no .symtab to find crypto/tls in";

const char* direction_name(uint16_t d) {
  return d == SONDE_TLS_CLIENT ? "client" : "server";
}

const char* method_name(uint16_t m) {
  static constexpr const char* kMethods[] = {"OTHER",  "GET",  "POST",  "PUT",
                                             "DELETE", "HEAD", "PATCH", "OPTIONS"};
  return m < SONDE_HTTP_METHOD_COUNT ? kMethods[m] : "OTHER";
}

std::string status_class(uint16_t status) {
  if (status < 100 || status > 599) return "unknown";
  return std::to_string(status / 100) + "xx";
}

}  // namespace

TlsMonitor::TlsMonitor(TlsProbes& probes, symbols::ProbeTargetCache& cache, SharedUprobes& uprobes,
                       const ProcReader& proc)
    : probes_(probes), cache_(cache), uprobes_(uprobes), proc_(proc) {}

TlsMonitor::BinaryVerdict TlsMonitor::verdict_for(const symbols::OpenBinary& binary,
                                                  const std::string& exe,
                                                  std::vector<symbols::ProbeTarget>& t) {
  std::string key = binary.identity().to_string();
  {
    std::lock_guard lock(mu_);
    if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  }
  BinaryVerdict v{exe, false, true, ""};
  auto elf = symbols::ElfFile::parse(binary.bytes());
  auto version = elf.ok() ? go_build_version(*elf) : Result<GoVersion>(elf.error());
  if (!version.ok()) {
    v.reason = "not a Go binary we can read: " + version.error().message();
  } else if (!go_register_abi(elf->machine(), *version)) {
    v.reason = version->text +
               " passes arguments on the stack (needs Go 1.17+ on amd64, "
               "1.18+ on arm64)";
  } else if (!t[kWrite].found || !t[kRead].found) {
    v.reason = "only one of (*Conn).Write and (*Conn).Read in the symbol table";
  } else if (!t[kRead].has_return_sites()) {
    v.reason = std::string("(*Conn).Read has no return site to probe (") +
               symbols::return_site_status_name(t[kRead].return_status) + ")";
  } else {
    v.instrumentable = true;
    v.reason = version->text;
  }
  log::info(v.instrumentable ? "instrumenting Go TLS binary" : "Go TLS binary not instrumentable",
            {{"binary", exe}, {"reason", v.reason}});
  std::lock_guard lock(mu_);
  remember_locked(key, v);
  return v;
}

void TlsMonitor::remember_locked(const std::string& key, const BinaryVerdict& v) {
  if (verdicts_.size() >= kMaxVerdicts) verdicts_.erase(verdicts_.begin());
  verdicts_.emplace(key, v);
}

const std::vector<std::string>& TlsMonitor::symbol_names() {
  return kNames;
}

TlsMonitor::Outcome TlsMonitor::consider(const Candidate& c, const ContainerLabels& labels) {
  const pid_t pid = c.info.pid;
  {
    std::lock_guard lock(mu_);
    auto it = processes_.find(pid);
    if (it != processes_.end()) {
      if (c.running && it->second.start_time == c.info.start_time) return Outcome::kTracked;
      finish_locked(pid);
    }
  }
  const std::string path = c.attach_path();
  auto targets = cache_.resolve(c.binary, kNames);
  if (!targets.ok()) return Outcome::kNotTlsUser;
  auto& t = *targets;

  if (!t[kWrite].found && !t[kRead].found) {
    // No TLS symbols. Only a Go binary (it carries a Go build-id note, which identity already
    // read) can be a stripped TLS user, and that one is worth a verdict: the user expects it
    // instrumented and must learn why it is not.
    if (c.binary.identity().digest_kind != symbols::BinaryIdentity::DigestKind::kGoBuildId) {
      return Outcome::kNotTlsUser;
    }
    std::string key = c.binary.identity().to_string();
    {
      std::lock_guard lock(mu_);
      if (auto it = verdicts_.find(key); it != verdicts_.end()) {
        return it->second.reported ? Outcome::kNotInstrumentable : Outcome::kNotTlsUser;
      }
    }
    auto elf = symbols::ElfFile::parse(c.binary.bytes());
    bool stripped = elf.ok() && !elf->find_section(".symtab");
    BinaryVerdict v{c.info.exe, false, stripped, stripped ? kStripped : "does not use crypto/tls"};
    if (stripped) {
      log::info("Go TLS binary not instrumentable", {{"binary", v.path}, {"reason", v.reason}});
    }
    std::lock_guard lock(mu_);
    remember_locked(key, v);
    return stripped ? Outcome::kNotInstrumentable : Outcome::kNotTlsUser;
  }
  auto verdict = verdict_for(c.binary, c.info.exe, t);
  if (!verdict.instrumentable) return Outcome::kNotInstrumentable;

  const auto& id = c.binary.identity();
  auto attach = [&](TlsProbes::Program program, const char* name, uint64_t offset) {
    return uprobes_.acquire({id, offset, name}, path, pid, [&](const std::string& p, uint64_t off) {
      return probes_.attach(program, p, off);
    });
  };
  Status st = attach(TlsProbes::Program::kWriteEnter, "gotls/write", t[kWrite].file_offset);
  if (st.ok()) st = attach(TlsProbes::Program::kReadEnter, "gotls/read", t[kRead].file_offset);
  for (uint32_t ret : t[kRead].return_offsets) {
    if (!st.ok()) break;
    st = attach(TlsProbes::Program::kReadReturn, "gotls/read_return", t[kRead].file_offset + ret);
  }
  if (st.ok()) st = probes_.track(pid);
  if (!st.ok()) {
    uprobes_.release(pid);
    if (is_gone(st.error())) return Outcome::kGone;
    log::warn("cannot instrument Go TLS process", {{"pid", pid}, {"error", st.error().message()}});
    return Outcome::kFailed;
  }
  std::lock_guard lock(mu_);
  processes_[pid] = Process{c.info.start_time, labels};
  containers_[labels].stats.processes++;
  return Outcome::kTracked;
}

void TlsMonitor::on_event(const sonde_tls_event& e) {
  std::lock_guard lock(mu_);
  auto p = processes_.find(static_cast<pid_t>(e.pid));
  if (p == processes_.end()) return;
  auto& s = containers_[p->second.labels].stats;
  std::string direction = direction_name(e.direction);
  if (e.protocol == SONDE_TLS_HTTP2) {
    s.http2_connections[direction]++;
    return;
  }
  s.requests[{direction, method_name(e.method), status_class(e.status)}]++;
  auto& h = s.durations[direction];
  double seconds = static_cast<double>(e.duration_ns) / 1e9;
  auto bucket = std::lower_bound(kTlsDurationBuckets.begin(), kTlsDurationBuckets.end(), seconds);
  if (bucket != kTlsDurationBuckets.end()) h.buckets[bucket - kTlsDurationBuckets.begin()]++;
  h.count++;
  h.sum += seconds;
}

void TlsMonitor::exited(pid_t pid) {
  std::lock_guard lock(mu_);
  finish_locked(pid);
}

void TlsMonitor::finish_locked(pid_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  auto bytes = probes_.untrack(pid);
  auto& s = containers_[it->second.labels].stats;
  s.read_bytes += bytes.read;
  s.written_bytes += bytes.written;
  s.processes--;
  processes_.erase(it);
  uprobes_.release(pid);
}

void TlsMonitor::sweep() {
  std::lock_guard lock(mu_);
  std::vector<pid_t> vanished;
  for (const auto& [pid, p] : processes_) {
    auto start = proc_.start_time(pid);
    if (!start.ok() || *start != p.start_time) vanished.push_back(pid);
  }
  for (pid_t pid : vanished) finish_locked(pid);
}

std::map<ContainerLabels, TlsMonitor::ContainerStats> TlsMonitor::snapshot() {
  std::lock_guard lock(mu_);
  std::map<ContainerLabels, ContainerStats> out;
  for (const auto& [labels, c] : containers_) out[labels] = c.stats;
  for (const auto& [pid, p] : processes_) {
    auto b = probes_.bytes(pid);
    out[p.labels].read_bytes += b.read;
    out[p.labels].written_bytes += b.written;
  }
  return out;
}

std::vector<TlsMonitor::BinaryVerdict> TlsMonitor::verdicts() const {
  std::lock_guard lock(mu_);
  std::vector<BinaryVerdict> out;
  for (const auto& [key, v] : verdicts_) {
    if (v.reported) out.push_back(v);
  }
  return out;
}

size_t TlsMonitor::tracked() const {
  std::lock_guard lock(mu_);
  return processes_.size();
}

}  // namespace sonde::agent
