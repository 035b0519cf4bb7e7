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
  auto* raw_self = self.get();
  ASSIGN_OR_RETURN(self->ring_, RingBufferReader::open(self->skel_->maps.events, "go tls probes",
                                                       [raw_self](std::span<const uint8_t> r) {
                                                         raw_self->on_record(r);
                                                       }));
  return self;
}

TlsProbes::~TlsProbes() = default;

void TlsProbes::on_record(std::span<const uint8_t> record) {
  if (record.size() < sizeof(sonde_tls_event)) return;  // a record from another build
  sonde_tls_event e;
  std::memcpy(&e, record.data(), sizeof e);
  on_event_(e);
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
  return ring_->poll(timeout_ms);
}

uint64_t TlsProbes::dropped() const {
  return sum_percpu_counter(skel_->maps.dropped, 0);
}

}  // namespace sonde::agent
