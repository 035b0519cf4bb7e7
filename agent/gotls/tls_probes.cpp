#include "agent/gotls/tls_probes.h"

#include <asm/ptrace.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <sstream>
#include <utility>

#include "agent/kernel/bpf_helpers.h"
#include "common/clock.h"
#include "gotls.skel.h"

namespace sonde::agent {
namespace {

// Calls fn(key) for each key of `map`, at most max_entries times: a key deleted under the walk
// sends the kernel's get_next_key back to the first key, so a map churning meanwhile is walked
// no further than it can hold, never without end.
template <typename Key, typename Fn>
void for_each_key(bpf_map* map, Fn fn) {
  Key key{};
  Key next{};
  const void* prev = nullptr;
  for (uint32_t left = bpf_map__max_entries(map);
       left > 0 && bpf_map__get_next_key(map, prev, &next, sizeof next) == 0; --left) {
    fn(next);
    key = next;
    prev = &key;
  }
}

// Deletes from `map` (keyed by a struct starting with a u32 tgid) every entry of tgid.
template <typename Key>
void delete_entries_of(bpf_map* map, uint32_t tgid) {
  std::vector<Key> doomed;
  for_each_key<Key>(map, [&](const Key& k) {
    if (k.pid == tgid) doomed.push_back(k);
  });
  for (const Key& k : doomed) bpf_map__delete_elem(map, &k, sizeof k, 0);
}

// Deletes each of `keys` from `map`, with the value it had then.
template <typename Key, typename Value>
std::vector<std::pair<Key, Value>> take_entries(bpf_map* map, const std::vector<Key>& keys) {
  std::vector<std::pair<Key, Value>> out;
  for (const Key& k : keys) {
    Value v{};
    if (bpf_map__lookup_and_delete_elem(map, &k, sizeof k, &v, sizeof v, 0) == 0) {
      out.emplace_back(k, v);
    }
  }
  return out;
}

// Every entry of tgid in `map` (keyed by a struct starting with a u32 tgid), with its value;
// each is deleted from the map.
template <typename Key, typename Value>
std::vector<std::pair<Key, Value>> take_entries_of(bpf_map* map, uint32_t tgid) {
  if (bpf_map__value_size(map) != sizeof(Value)) return {};  // a layout below is out of date
  std::vector<Key> keys;
  for_each_key<Key>(map, [&](const Key& k) {
    if (k.pid == tgid) keys.push_back(k);
  });
  return take_entries<Key, Value>(map, keys);
}

// Every entry of `map` whose time, ts(value), is before before_ns, with its value; each is
// deleted from the map. An entry the kernel replaced between the walk and the delete (its time
// recent again) is put back as it was: it is the kernel's, and its count never changed.
template <typename Key, typename Value, typename Ts>
std::vector<std::pair<Key, Value>> take_entries_before(bpf_map* map, uint64_t before_ns, Ts ts) {
  if (bpf_map__value_size(map) != sizeof(Value)) return {};
  std::vector<Key> keys;
  for_each_key<Key>(map, [&](const Key& k) {
    Value v{};
    if (bpf_map__lookup_elem(map, &k, sizeof k, &v, sizeof v, 0) == 0 && ts(v) < before_ns) {
      keys.push_back(k);
    }
  });
  auto taken = take_entries<Key, Value>(map, keys);
  std::erase_if(taken, [&](const auto& entry) {
    const auto& [k, v] = entry;
    if (ts(v) < before_ns) return false;
    (void)bpf_map__update_elem(map, &k, sizeof k, &v, sizeof v, BPF_NOEXIST);
    return true;
  });
  return taken;
}

// Key and value layouts of the in-flight maps (bpf/gotls/gotls.bpf.c), for a process's entries.
struct GoroutineKey {
  uint32_t pid;
  uint32_t pad;
  uint64_t g;
};
struct ConnKey {
  uint32_t pid;
  uint32_t pad;
  uint64_t conn;
};
struct H2Key {  // struct h2_key
  uint32_t pid;
  uint8_t outgoing;
  uint8_t pad[3];
  uint64_t conn;
};
static_assert(sizeof(H2Key) == 16);
struct Exchange {  // struct exchange: an HTTP/1.x request waiting for its response
  uint64_t start_ns;
  uint16_t direction;
  uint16_t method;
  uint32_t pad;
};
static_assert(sizeof(Exchange) == 16);
struct H2State {  // struct h2_state: the framing of one direction
  uint64_t seq;
  uint32_t remaining;
  uint8_t forward;
  uint8_t have;
  uint8_t dead;
  uint8_t notify;
  uint8_t midway;
  uint8_t hdr[16];
};
static_assert(sizeof(H2State) == 40);

constexpr uint64_t kBoundsNs[SONDE_GOTLS_BUCKETS] = SONDE_GOTLS_BUCKET_BOUNDS_NS;

// One HTTP/1.x request still waiting for its response when its process exited: counted with
// status_class 0 ("unknown"), its duration up to now_ns (as an HTTP/2 stream, http2_tracker.h).
std::pair<sonde_tls_request_key, sonde_tls_request_stats> unanswered(uint32_t tgid,
                                                                     const Exchange& x,
                                                                     uint64_t now_ns) {
  sonde_tls_request_key k{};
  k.tgid = tgid;
  k.direction = static_cast<uint8_t>(x.direction);
  k.protocol = SONDE_TLS_HTTP1;
  k.method = x.method < SONDE_HTTP_METHOD_COUNT ? static_cast<uint8_t>(x.method)
                                                : static_cast<uint8_t>(SONDE_HTTP_OTHER);
  sonde_tls_request_stats s{};
  const uint64_t duration = now_ns > x.start_ns ? now_ns - x.start_ns : 0;
  s.count = 1;
  s.duration_sum_ns = duration;
  size_t bucket = SONDE_GOTLS_BUCKETS;
  for (size_t i = 0; i < SONDE_GOTLS_BUCKETS; ++i) {
    if (duration <= kBoundsNs[i]) {
      bucket = i;
      break;
    }
  }
  s.buckets[bucket] = 1;
  return {k, s};
}

// Adds `request` to `requests`, into the entry of the same key if there is one: a process's
// requests counted by forget_idle() take one entry per key, however many there are.
void add_request(std::vector<std::pair<sonde_tls_request_key, sonde_tls_request_stats>>& requests,
                 const std::pair<sonde_tls_request_key, sonde_tls_request_stats>& request) {
  for (auto& [k, s] : requests) {
    if (std::memcmp(&k, &request.first, sizeof k) != 0) continue;
    s.count += request.second.count;
    s.duration_sum_ns += request.second.duration_sum_ns;
    for (size_t i = 0; i < std::size(s.buckets); ++i) s.buckets[i] += request.second.buckets[i];
    return;
  }
  requests.push_back(request);
}

}  // namespace

// The kernel series that allows the write ("uprobe,bpf: Allow to change app registers from uprobe
// registers": "bpf: Allow uprobe program to change context registers" with "uprobe: Do not
// emulate/sstep original instruction when ip is changed") came after Linux 6.18, which refuses
// it (measured: "invalid bpf_context access"); a kernel that accepts the write therefore also
// skips the single step.
Status kernel_allows_uprobe_register_writes() {
#if defined(__x86_64__)
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_STX | BPF_MEM | BPF_DW,
       .dst_reg = BPF_REG_1,
       .src_reg = BPF_REG_2,
       .off = static_cast<int16_t>(offsetof(pt_regs, rip)),
       .imm = 0},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  std::array<char, 4096> log{};
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_level = 1, .log_size = log.size(),
              .log_buf = log.data());
  int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, nullptr, "GPL", insns, std::size(insns), &opts);
  if (fd >= 0) {
    close(fd);
    return ok_status();
  }
  const int err = errno;
  // The verifier's verdict is the last line before its statistics ("invalid bpf_context access
  // off=128 size=8", then "processed 2 insns ...").
  std::string verdict;
  std::istringstream lines(std::string(log.data(), strnlen(log.data(), log.size())));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && !line.starts_with("processed ")) verdict = line;
  }
  if (verdict.empty())
    return errno_error("load a uprobe program that writes the instruction pointer", err);
  return Error(
      "the verifier refuses a uprobe program that writes the instruction pointer: " + verdict, err);
#else
  return Error("the ret-performing program exists for x86-64 only");
#endif
}

const char* gotls_counter_map_name(sonde_gotls_counter counter) {
  switch (counter) {
    case SONDE_GOTLS_FULL_PROCESSES: return "processes";
    case SONDE_GOTLS_FULL_REQUESTS: return "requests";
    case SONDE_GOTLS_FULL_READS: return "reads";
    case SONDE_GOTLS_FULL_EXCHANGES: return "exchanges";
    case SONDE_GOTLS_FULL_CARRIED: return "carried";
    case SONDE_GOTLS_FULL_H2_STATES: return "h2_states";
    case SONDE_GOTLS_H2_RINGBUF_FULL: return "h2_events";
    case SONDE_GOTLS_H2_WALK_BOUND: return "h2_walk_steps";
    case SONDE_GOTLS_H2_BLOCK_BOUND: return "h2_frame_bytes";
    case SONDE_GOTLS_SHARE_H2_STATES: return "h2_states";
    case SONDE_GOTLS_SHARE_EXCHANGES: return "exchanges";
    case SONDE_GOTLS_SHARE_READS: return "reads";
    case SONDE_GOTLS_SHARE_CARRIED: return "carried";
    case SONDE_GOTLS_SHARE_H2_EVENTS: return "h2_events";
    case SONDE_GOTLS_COUNTER_COUNT: break;
  }
  return "unknown";
}

const char* gotls_counter_reason(sonde_gotls_counter counter) {
  return counter >= SONDE_GOTLS_SHARE_FIRST && counter < SONDE_GOTLS_COUNTER_COUNT ? "process_share"
                                                                                   : "map_full";
}

const char* gotls_shared_table_name(sonde_gotls_shared_table table) {
  return gotls_counter_map_name(static_cast<sonde_gotls_counter>(
      static_cast<int>(SONDE_GOTLS_SHARE_FIRST) + static_cast<int>(table)));
}

TlsProbes::Shares TlsProbes::default_shares() {
  return {SONDE_GOTLS_MAX_H2_STATES / SONDE_GOTLS_SHARE_DIVISOR,
          SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR,
          SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR,
          SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR, SONDE_GOTLS_H2_EVENTS_SHARE};
}

bool TlsProbes::kernel_has_bpf_loop() {
  static const bool has =
      libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, nullptr) == 1;
  return has;
}

Result<std::unique_ptr<TlsProbes>> TlsProbes::open_and_load(bool perform_ret, UprobeLinkKind links,
                                                            bool http2, const Shares& shares) {
  std::unique_ptr<TlsProbes> self(new TlsProbes());
  self->skel_ = {gotls_bpf__open(), gotls_bpf__destroy};
  if (!self->skel_) return errno_error("go tls probes: open BPF object", errno);
  configure_pid_namespace(self->skel_->rodata);
  for (size_t t = 0; t < shares.size(); ++t) self->skel_->rodata->share[t] = shares[t];
  auto& p = self->skel_->progs;
  // One set of the programs that see plaintext: with HTTP/2 framing, or the *_h1 twins.
  for (auto [h2, h1] : {std::pair{p.tls_write_enter, p.tls_write_enter_h1},
                        {p.tls_write_checked, p.tls_write_checked_h1},
                        {p.tls_read_return, p.tls_read_return_h1}}) {
    bpf_program__set_autoload(h2, http2);
    bpf_program__set_autoload(h1, !http2);
  }
#if defined(__x86_64__)
  bpf_program__set_autoload(p.tls_read_return_ret, perform_ret && http2);
  bpf_program__set_autoload(p.tls_read_return_ret_h1, perform_ret && !http2);
#endif
  self->http2_ = http2;
  self->can_perform_ret_ = perform_ret;
  self->links_ = links;
  bpf_program* program = nullptr;  // every program of gotls.bpf.c is a uprobe
  bpf_object__for_each_program(program, self->skel_->obj) {
    prepare_uprobe_program(program, links);
  }
  if (int err = gotls_bpf__load(self->skel_.get()); err) {
    return errno_error("go tls probes: load BPF programs (run 'sonde-agent doctor')", -err);
  }
  return self;
}

Result<std::unique_ptr<TlsProbes>> TlsProbes::load(bool perform_ret, UprobeLinkKind links,
                                                   bool http2, const Shares& shares) {
  std::string register_writes = "off";
  if (perform_ret) {
    Status allowed = kernel_allows_uprobe_register_writes();
    perform_ret = allowed.ok();
    register_writes = allowed.ok() ? "on" : "refused by the kernel: " + allowed.error().message();
  }
  auto loaded = open_and_load(perform_ret, links, http2, shares);
  if (!loaded.ok() && perform_ret) {
    // The verifier took the probe program but not tls_read_return_ret as loaded here (another
    // attach type, its helpers): the RETs are single-stepped and the rest still counts.
    register_writes = "refused at load: " + loaded.error().message();
    loaded = open_and_load(false, links, http2, shares);
  }
  if (!loaded.ok()) return loaded.error();
  std::unique_ptr<TlsProbes> self = std::move(loaded).value();
  self->register_writes_ = std::move(register_writes);
  TlsProbes* raw = self.get();
  self->tracker_ = std::make_unique<Http2Tracker>(
      Http2Tracker::Limits(),
      [raw](uint32_t pid, uint64_t conn) { raw->forget_connection(pid, conn); });
  self->ring_ = {
      ring_buffer__new(bpf_map__fd(self->skel_->maps.h2_events), on_h2_record, self.get(), nullptr),
      ring_buffer__free};
  if (!self->ring_) return errno_error("go tls probes: open the HTTP/2 ring buffer", errno);
  // Only the cgroup filter needs it: without it the filter turns off, saying why.
  auto cgroups = ProcessCgroups::load();
  if (cgroups.ok()) {
    self->cgroups_ = std::move(cgroups).value();
  } else {
    self->cgroups_error_ = cgroups.error();
  }
  return self;
}

TlsProbes::~TlsProbes() = default;

Result<std::unique_ptr<Attachment>> TlsProbes::attach(Program program, const std::string& path,
                                                      std::span<const UprobeSite> sites) {
  auto& p = skel_->progs;
  bpf_program* prog = nullptr;
  switch (program) {
    case Program::kWriteEnter: prog = http2_ ? p.tls_write_enter : p.tls_write_enter_h1; break;
    case Program::kWriteChecked:
      prog = http2_ ? p.tls_write_checked : p.tls_write_checked_h1;
      break;
    case Program::kReadEnter: prog = p.tls_read_enter; break;
    case Program::kReadChecked: prog = p.tls_read_checked; break;
    case Program::kReadReturn: prog = http2_ ? p.tls_read_return : p.tls_read_return_h1; break;
    case Program::kReadReturnRet:
#if defined(__x86_64__)
      if (can_perform_ret_) prog = http2_ ? p.tls_read_return_ret : p.tls_read_return_ret_h1;
#endif
      break;
  }
  if (prog == nullptr) return Error("go tls probes: the ret-performing program is not loaded");
  return attach_uprobes(prog, links_, path, sites);
}

void TlsProbes::filter_by_cgroup(bool on) {
  skel_->bss->filter_by_cgroup = on ? 1 : 0;
}

Status TlsProbes::allow_cgroup(uint64_t cgroup_id) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.allowed_cgroups, &cgroup_id, sizeof cgroup_id, &one,
                           sizeof one, BPF_ANY) != 0) {
    return errno_error("allow cgroup " + std::to_string(cgroup_id) + " in go tls filter", errno);
  }
  return ok_status();
}

void TlsProbes::disallow_cgroup(uint64_t cgroup_id) {
  bpf_map__delete_elem(skel_->maps.allowed_cgroups, &cgroup_id, sizeof cgroup_id, 0);
}

Result<uint64_t> TlsProbes::cgroup_of(pid_t pid, uint64_t start_time) const {
  if (!cgroups_) return *cgroups_error_;
  return cgroups_->cgroup_of(pid, start_time);
}

int TlsProbes::on_h2_record(void* self, void* data, size_t size) {
  const auto* probes = static_cast<const TlsProbes*>(self);
  probes->tracker_->on_record({static_cast<const uint8_t*>(data), size});
  if (size >= sizeof(uint32_t)) {
    uint32_t pid = 0;
    std::memcpy(&pid, data, sizeof pid);  // sonde_h2_event.pid, first in every record
    probes->drained_bytes_[pid] += size;  // the size the kernel reserved and counted
  }
  return 0;
}

void TlsProbes::drain() const {
  std::lock_guard lock(drain_mu_);
  ring_buffer__consume(ring_.get());
  for (const auto& [pid, bytes] : drained_bytes_) release(pid, SONDE_GOTLS_SHARED_H2_EVENTS, bytes);
  drained_bytes_.clear();
}

bool TlsProbes::wait_for_records(int timeout_ms) const {
  // The ring buffer's epoll set, waited on directly: ring_buffer__poll() would hold drain_mu_
  // (it consumes) for the whole wait, and counts() and take() drain.
  epoll_event event{};
  return epoll_wait(ring_buffer__epoll_fd(ring_.get()), &event, 1, timeout_ms) > 0;
}

void TlsProbes::forget_connection(uint32_t pid, uint64_t conn) const {
  uint64_t deleted = 0;
  for (uint8_t outgoing : {0, 1}) {
    H2Key k{.pid = pid, .outgoing = outgoing, .pad = {}, .conn = conn};
    if (bpf_map__delete_elem(skel_->maps.h2_states, &k, sizeof k, 0) == 0) ++deleted;
  }
  release(pid, SONDE_GOTLS_SHARED_H2_STATES, deleted);
}

void TlsProbes::release(uint32_t tgid, sonde_gotls_shared_table table, uint64_t n) const {
  if (n == 0) return;
  std::lock_guard lock(released_mu_);
  // A process taken already (exited) gets no `released` entry: it would stay for good. take()
  // deletes the process's entry before its `released` one, under this lock.
  if (!counting(tgid)) return;
  sonde_gotls_released r{};
  // Absent: nothing released yet (or the process was taken; its leftovers go at the next take).
  (void)bpf_map__lookup_elem(skel_->maps.released, &tgid, sizeof tgid, &r, sizeof r, 0);
  r.n[table] += n;
  // Full (SONDE_GOTLS_MAX_PROCESSES live processes with releases): the process keeps counting
  // the entries as held, which costs only its own share.
  (void)bpf_map__update_elem(skel_->maps.released, &tgid, sizeof tgid, &r, sizeof r, BPF_ANY);
}

std::map<uint32_t, TlsProbes::Counts> TlsProbes::counts() const {
  drain();
  std::map<uint32_t, Counts> out;
  for_each_key<uint32_t>(skel_->maps.processes, [&](uint32_t tgid) {
    sonde_tls_process b{};
    if (bpf_map__lookup_elem(skel_->maps.processes, &tgid, sizeof tgid, &b, sizeof b, 0) != 0) {
      return;
    }
    sonde_gotls_released r{};
    if (bpf_map__lookup_elem(skel_->maps.released, &tgid, sizeof tgid, &r, sizeof r, 0) == 0) {
      for (size_t t = 0; t < SONDE_GOTLS_SHARED_COUNT; ++t) {
        b.held[t] -= static_cast<int64_t>(r.n[t]);
      }
    }
    out[tgid].process = b;
  });
  for_each_key<sonde_tls_request_key>(skel_->maps.requests, [&](const sonde_tls_request_key& k) {
    sonde_tls_request_stats s{};
    if (bpf_map__lookup_elem(skel_->maps.requests, &k, sizeof k, &s, sizeof s, 0) == 0) {
      out[k.tgid].requests.emplace_back(k, s);
    }
  });
  for (auto& [tgid, requests] : tracker_->counts()) {
    auto& r = out[tgid].requests;
    r.insert(r.end(), requests.begin(), requests.end());
  }
  std::lock_guard lock(idle_mu_);
  for (const auto& [tgid, requests] : idle_requests_) {
    auto& r = out[tgid].requests;
    r.insert(r.end(), requests.begin(), requests.end());
  }
  return out;
}

bool TlsProbes::counting(uint32_t tgid) const {
  sonde_tls_process b{};
  return bpf_map__lookup_elem(skel_->maps.processes, &tgid, sizeof tgid, &b, sizeof b, 0) == 0;
}

TlsProbes::Counts TlsProbes::take(uint32_t tgid) {
  drain();
  Counts out;
  {
    // forget_idle() adds to a process's requests only while the kernel counts it: after this
    // block, nothing more of tgid goes there (unless a late call of it re-creates its entry;
    // TlsMonitor::sweep() takes such leftovers).
    std::lock_guard lock(idle_mu_);
    bpf_map__lookup_and_delete_elem(skel_->maps.processes, &tgid, sizeof tgid, &out.process,
                                    sizeof out.process, 0);
    if (auto it = idle_requests_.find(tgid); it != idle_requests_.end()) {
      out.requests = std::move(it->second);
      idle_requests_.erase(it);
    }
  }
  std::vector<sonde_tls_request_key> keys;
  for_each_key<sonde_tls_request_key>(skel_->maps.requests, [&](const sonde_tls_request_key& k) {
    if (k.tgid == tgid) keys.push_back(k);
  });
  auto taken =
      take_entries<sonde_tls_request_key, sonde_tls_request_stats>(skel_->maps.requests, keys);
  out.requests.insert(out.requests.end(), taken.begin(), taken.end());
  const uint64_t now = monotonic_ns();
  delete_entries_of<GoroutineKey>(skel_->maps.reads, tgid);
  for (const auto& [k, x] : take_entries_of<ConnKey, Exchange>(skel_->maps.exchanges, tgid)) {
    if (x.direction == SONDE_TLS_CLIENT || x.direction == SONDE_TLS_SERVER) {
      out.requests.push_back(unanswered(tgid, x, now));
    }
  }
  delete_entries_of<ConnKey>(skel_->maps.carried, tgid);
  // The ring buffer is drained: a direction the kernel gave up without telling yet is told now.
  for (const auto& [k, st] : take_entries_of<H2Key, H2State>(skel_->maps.h2_states, tgid)) {
    if (st.midway == 0)
      tracker_->on_exit_state(tgid, k.conn, k.outgoing != 0, st.seq, st.dead != 0);
  }
  auto h2 = tracker_->take(tgid, now);
  out.requests.insert(out.requests.end(), h2.begin(), h2.end());
  {
    std::lock_guard lock(released_mu_);
    bpf_map__delete_elem(skel_->maps.released, &tgid, sizeof tgid, 0);
  }
  return out;
}

TlsProbes::Forgotten TlsProbes::forget_idle(uint64_t before_ns) {
  const uint64_t now = monotonic_ns();
  std::lock_guard lock(idle_mu_);
  std::map<uint32_t, std::array<uint64_t, SONDE_GOTLS_SHARED_COUNT>> freed;
  for (const auto& [k, x] : take_entries_before<ConnKey, Exchange>(
           skel_->maps.exchanges, before_ns, [](const Exchange& x) { return x.start_ns; })) {
    ++freed[k.pid][SONDE_GOTLS_SHARED_EXCHANGES];
    ++forgotten_.exchanges;
    // Counted as a request ended now, status unknown, as at its process's exit.
    if ((x.direction == SONDE_TLS_CLIENT || x.direction == SONDE_TLS_SERVER) && counting(k.pid)) {
      add_request(idle_requests_[k.pid], unanswered(k.pid, x, now));
    }
  }
  for (const auto& [k, c] : take_entries_before<ConnKey, sonde_gotls_carried>(
           skel_->maps.carried, before_ns, [](const sonde_gotls_carried& c) { return c.ts_ns; })) {
    ++freed[k.pid][SONDE_GOTLS_SHARED_CARRIED];
    ++forgotten_.carried;
  }
  for (const auto& [tgid, n] : freed) {
    for (size_t t = 0; t < n.size(); ++t) {
      release(tgid, static_cast<sonde_gotls_shared_table>(t), n[t]);
    }
  }
  return forgotten_;
}

uint64_t TlsProbes::full(sonde_gotls_counter counter) const {
  return sum_percpu_counter(skel_->maps.counters, static_cast<uint32_t>(counter));
}

}  // namespace sonde::agent
