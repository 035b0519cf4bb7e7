#include "agent/gotls/tls_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "gotls.skel.h"

namespace sonde::agent {
Result<std::unique_ptr<TlsProbes>> TlsProbes::load(EventFn on_event) {
  std::unique_ptr<TlsProbes> self(new TlsProbes(std::move(on_event)));
  self->skel_ = {gotls_bpf__open(), gotls_bpf__destroy};
  if (!self->skel_) return errno_error("go tls probes: open BPF object", errno);
  if (int err = gotls_bpf__load(self->skel_.get()); err) {
    return errno_error("go tls probes: load BPF programs (run 'sonde-agent doctor')", -err);
  }
  self->ring_ = {
      ring_buffer__new(bpf_map__fd(self->skel_->maps.events), &on_sample, self.get(), nullptr),
      ring_buffer__free};
  if (!self->ring_) return errno_error("go tls probes: open ring buffer", errno);
  return self;
}

TlsProbes::~TlsProbes() = default;

int TlsProbes::on_sample(void* ctx, void* data, size_t size) {
  if (size < sizeof(sonde_tls_event)) return 0;
  sonde_tls_event e;
  std::memcpy(&e, data, sizeof e);
  static_cast<TlsProbes*>(ctx)->on_event_(e);
  return 0;
}

Result<std::unique_ptr<Attachment>> TlsProbes::attach(Program program, const std::string& path,
                                                      uint64_t file_offset) {
  bpf_program* prog = program == Program::kWriteEnter  ? skel_->progs.tls_write_enter
                      : program == Program::kReadEnter ? skel_->progs.tls_read_enter
                                                       : skel_->progs.tls_read_return;
  return attach_uprobe(prog, path, file_offset);
}

Status TlsProbes::track(pid_t pid) {
  auto key = static_cast<uint32_t>(pid);
  sonde_tls_bytes zero{};
  if (bpf_map__update_elem(skel_->maps.processes, &key, sizeof key, &zero, sizeof zero, BPF_ANY) !=
      0) {
    return errno_error("track pid " + std::to_string(pid) + " in go tls map", errno);
  }
  return ok_status();
}

sonde_tls_bytes TlsProbes::bytes(pid_t pid) const {
  auto key = static_cast<uint32_t>(pid);
  sonde_tls_bytes b{};
  bpf_map__lookup_elem(skel_->maps.processes, &key, sizeof key, &b, sizeof b, 0);
  return b;
}

sonde_tls_bytes TlsProbes::untrack(pid_t pid) {
  auto b = bytes(pid);
  auto key = static_cast<uint32_t>(pid);
  bpf_map__delete_elem(skel_->maps.processes, &key, sizeof key, 0);
  return b;
}

Result<int> TlsProbes::poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_.get(), timeout_ms);
  if (n == -EINTR) return 0;
  if (n < 0) return errno_error("go tls probes: poll ring buffer", -n);
  return n;
}

uint64_t TlsProbes::dropped() const {
  return sum_percpu_counter(skel_->maps.dropped, 0);
}

}  // namespace sonde::agent
