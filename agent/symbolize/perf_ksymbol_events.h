// PerfKsymbolEvents: the kernel's own notifications of kernel symbols coming and going
// (PERF_RECORD_KSYMBOL, Linux >= 5.1) for BPF programs, subprograms, trampolines and
// dispatchers, read from one perf side-band event per online CPU.
//
// Why perf and not a BPF probe on bpf_ksym_add/bpf_ksym_del: kprobes need CONFIG_KPROBES and
// fentry needs BPF trampolines, and nodes exist with either unavailable (on this project's test
// machines CONFIG_KPROBES is off and fentry loads fail with EPERM); the perf record is ABI, needs
// no program and carries address, length and name.
//
// Drops are counted exactly: the kernel counts every record a full buffer refused in the
// event's lost count, read through PERF_FORMAT_LOST (Linux >= 6.0). Older kernels reject that
// read format; there the PERF_RECORD_LOST records are summed instead, which the kernel writes
// only once the buffer has room and the next record arrives, so drops are seen one record later.
// Owns its fds and mappings; destroying it closes them. Not thread-safe: one thread polls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::symbolize {

struct KsymbolRecord {
  uint64_t address = 0;
  uint32_t length = 0;
  bool unregister = false;  // the symbol is going away
  std::string_view name;    // valid during the callback only
};

class PerfKsymbolEvents {
 public:
  using Callback = std::function<void(const KsymbolRecord&)>;

  // Opens a dummy software event with `ksymbol` on every online CPU (listed in
  // <sys_root>/devices/system/cpu/online), each with `data_pages` pages of ring buffer (a power
  // of two). Needs CAP_PERFMON (or perf_event_paranoid <= 0). Errors name the CPU and the step.
  // A CPU brought online later is not followed: symbols registered on it are missed until the
  // next full read (CPU hotplug on nodes is rare; reopening is the caller's choice).
  enum class LostAccounting : uint8_t {
    kAuto,         // the exact lost count where the kernel has it, else the LOST records
    kRecordsOnly,  // the LOST records only (what kernels before 6.0 allow; tests force it)
  };
  static Result<std::unique_ptr<PerfKsymbolEvents>> open(
      size_t data_pages = 16, const std::string& sys_root = "/sys",
      LostAccounting accounting = LostAccounting::kAuto);

  ~PerfKsymbolEvents();
  PerfKsymbolEvents(const PerfKsymbolEvents&) = delete;
  PerfKsymbolEvents& operator=(const PerfKsymbolEvents&) = delete;

  // Waits up to timeout_ms for records, then delivers every BPF-type ksymbol record of every
  // CPU to `callback`, merged into kernel time order. Returns the number delivered; EINTR is zero
  // records.
  Result<int> poll(int timeout_ms, const Callback& callback);

  // Records the kernel dropped because a buffer was full, summed over CPUs: read now from the
  // kernel's counts, or summed from the LOST records polled so far.
  Result<uint64_t> lost() const;

  // An epoll fd that is readable when records are pending.
  int fd() const { return epoll_.get(); }

 private:
  struct Cpu {
    UniqueFd fd;
    void* base = nullptr;  // perf_event_mmap_page followed by the data pages
    size_t mapped = 0;
  };
  struct Pending {
    uint64_t time;
    uint64_t address;
    uint32_t length;
    bool unregister;
    size_t name_offset;  // into names_
    size_t name_length;
  };
  PerfKsymbolEvents() = default;
  void drain(Cpu& cpu);

  std::vector<Cpu> cpus_;
  UniqueFd epoll_;
  std::vector<uint8_t> scratch_;  // one record copied out of the ring when it wraps
  std::vector<Pending> pending_;  // records of one poll, merged across CPUs by time
  std::string names_;
  bool lost_from_records_ = false;
  uint64_t lost_in_records_ = 0;
};

// Parses a CPU list such as "0-3,5,8-9" (sysfs `online` format); an error for malformed text.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

}  // namespace sonde::symbolize
