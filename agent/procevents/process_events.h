// ProcessEventSource: exec and exit events of every process on the host, from the kernel's
// sched tracepoints through a BPF ring buffer (bpf/procevents/procevents.bpf.c).
//
// Owns its BPF skeleton and links: destroying it detaches and frees every kernel object.
// Not thread-safe: one thread calls poll(); the callback runs on that thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "agent/kernel/bpf_helpers.h"
#include "common/result.h"

struct procevents_bpf;

namespace sonde::agent {

struct ProcessEvent {
  enum class Kind { kExec, kExit };
  Kind kind;
  uint32_t pid;
  uint32_t ppid;
  uint64_t timestamp_ns;  // CLOCK_MONOTONIC
  uint64_t cgroup_id;
  uint32_t exit_code;  // wait(2) status for kExit
  std::string comm;
  std::string filename;  // execve path for kExec
};

// What the agent's runtime reads of them: ProcessEventSource on a real kernel, a fake in the
// runtime's unit tests. The callback is given when the source is built.
class ProcessEvents {
 public:
  using Callback = std::function<void(const ProcessEvent&)>;
  virtual ~ProcessEvents() = default;

  // Waits up to timeout_ms for events and delivers every available one to the callback.
  // Returns the number delivered; EINTR counts as zero events, not an error.
  virtual Result<int> poll(int timeout_ms) = 0;
  // Events the kernel could not queue because the ring buffer was full.
  virtual uint64_t dropped() const = 0;
};

class ProcessEventSource final : public ProcessEvents {
 public:
  // Loads and attaches the programs. Fails with a message naming the step (open, load, attach)
  // and the kernel's reason; nothing is left attached on failure.
  static Result<std::unique_ptr<ProcessEventSource>> start(Callback callback);

  ~ProcessEventSource() override;
  ProcessEventSource(const ProcessEventSource&) = delete;
  ProcessEventSource& operator=(const ProcessEventSource&) = delete;

  Result<int> poll(int timeout_ms) override;
  uint64_t dropped() const override;

 private:
  explicit ProcessEventSource(Callback callback) : callback_(std::move(callback)) {}
  void on_record(std::span<const uint8_t> record);

  Callback callback_;
  std::unique_ptr<procevents_bpf, void (*)(procevents_bpf*)> skel_{nullptr, nullptr};
  std::unique_ptr<RingBufferReader> ring_;  // after skel_: freed before the map it reads
};

}  // namespace sonde::agent
