#include "agent/procevents/process_events.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/kernel/bpf_helpers.h"
#include "bpf/procevents/procevents.h"
#include "procevents.skel.h"

namespace sonde::agent {
namespace {

std::string bounded_string(const char* s, size_t max) {
  return std::string(s, strnlen(s, max));
}

}  // namespace

Result<std::unique_ptr<ProcessEventSource>> ProcessEventSource::start(Callback callback) {
  std::unique_ptr<ProcessEventSource> self(new ProcessEventSource(std::move(callback)));
  self->skel_ = {procevents_bpf__open(), procevents_bpf__destroy};
  if (!self->skel_) return errno_error("process events: open BPF object", errno);
  configure_pid_namespace(self->skel_->rodata);
  if (int err = procevents_bpf__load(self->skel_.get()); err) {
    return errno_error("process events: load BPF programs (run 'sonde-agent doctor')", -err);
  }
  if (int err = procevents_bpf__attach(self->skel_.get()); err) {
    return errno_error("process events: attach sched_process_exec/exit tracepoints", -err);
  }
  auto* raw_self = self.get();
  ASSIGN_OR_RETURN(self->ring_, RingBufferReader::open(self->skel_->maps.events, "process events",
                                                       [raw_self](std::span<const uint8_t> r) {
                                                         raw_self->on_record(r);
                                                       }));
  return self;
}

ProcessEventSource::~ProcessEventSource() = default;

void ProcessEventSource::on_record(std::span<const uint8_t> record) {
  if (record.size() < sizeof(sonde_proc_event)) return;  // a record from another build: skip it
  sonde_proc_event raw;
  std::memcpy(&raw, record.data(), sizeof raw);
  ProcessEvent ev{
      .kind = raw.kind == SONDE_PROC_EXIT ? ProcessEvent::Kind::kExit : ProcessEvent::Kind::kExec,
      .pid = raw.pid,
      .ppid = raw.ppid,
      .timestamp_ns = raw.timestamp_ns,
      .cgroup_id = raw.cgroup_id,
      .exit_code = raw.exit_code,
      .comm = bounded_string(raw.comm, sizeof raw.comm),
      .filename = bounded_string(raw.filename, sizeof raw.filename),
  };
  callback_(ev);
}

Result<int> ProcessEventSource::poll(int timeout_ms) {
  return ring_->poll(timeout_ms);
}

uint64_t ProcessEventSource::dropped() const {
  return sum_percpu_counter(skel_->maps.dropped, 0);
}

}  // namespace sonde::agent
