#include "agent/procevents/process_events.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/kernel/bpf_helpers.h"
#include "procevents.h"
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
  if (int err = procevents_bpf__load(self->skel_.get()); err) {
    return errno_error("process events: load BPF programs (run 'sonde-agent doctor')", -err);
  }
  if (int err = procevents_bpf__attach(self->skel_.get()); err) {
    return errno_error("process events: attach sched_process_exec/exit tracepoints", -err);
  }
  self->ring_ = {
      ring_buffer__new(bpf_map__fd(self->skel_->maps.events), &on_sample, self.get(), nullptr),
      ring_buffer__free};
  if (!self->ring_) return errno_error("process events: open ring buffer", errno);
  return self;
}

ProcessEventSource::~ProcessEventSource() = default;

int ProcessEventSource::on_sample(void* ctx, void* data, size_t size) {
  auto* self = static_cast<ProcessEventSource*>(ctx);
  if (size < sizeof(sonde_proc_event)) return 0;  // a record from another build: skip it
  sonde_proc_event raw;
  std::memcpy(&raw, data, sizeof raw);
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
  self->callback_(ev);
  return 0;
}

Result<int> ProcessEventSource::poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_.get(), timeout_ms);
  if (n == -EINTR) return 0;
  if (n < 0) return errno_error("process events: poll ring buffer", -n);
  return n;
}

int ProcessEventSource::fd() const {
  return ring_buffer__epoll_fd(ring_.get());
}

uint64_t ProcessEventSource::dropped() const {
  return sum_percpu_counter(skel_->maps.dropped, SONDE_PROC_DROPPED_KEY);
}

}  // namespace sonde::agent
