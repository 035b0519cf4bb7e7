#include "agent/symbolize/perf_ksymbol_events.h"

#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "agent/symbolize/kallsyms.h"

namespace sonde::symbolize {
namespace {

// Offsets inside a PERF_RECORD_KSYMBOL record (include/uapi/linux/perf_event.h):
// header, u64 addr, u32 len, u16 ksym_type, u16 flags, char name[].
constexpr size_t kKsymAddr = sizeof(perf_event_header);
constexpr size_t kKsymLen = kKsymAddr + 8;
constexpr size_t kKsymType = kKsymLen + 4;
constexpr size_t kKsymFlags = kKsymType + 2;
constexpr size_t kKsymName = kKsymFlags + 2;
// PERF_RECORD_LOST: header, u64 id, u64 lost.
constexpr size_t kLostCount = sizeof(perf_event_header) + 8;
// perf_event_header.size is 16 bits.
constexpr size_t kMaxRecord = 65535;

int perf_event_open(perf_event_attr* attr, int cpu) {
  return static_cast<int>(
      syscall(SYS_perf_event_open, attr, -1 /* all pids */, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  auto number = [](std::string_view s, int* out) {
    if (s.empty() || s.size() > 6) return false;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    size_t dash = item.find('-');
    int lo = 0, hi = 0;
    bool ok = dash == std::string_view::npos
                  ? number(item, &lo) && number(item, &hi)
                  : number(item.substr(0, dash), &lo) && number(item.substr(dash + 1), &hi);
    if (!ok || hi < lo) return Error("cpu list: malformed item '" + std::string(item) + "'");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  if (cpus.empty()) return Error("cpu list: empty");
  return cpus;
}

Result<std::unique_ptr<PerfKsymbolEvents>> PerfKsymbolEvents::open(size_t data_pages,
                                                                   const std::string& sys_root,
                                                                   LostAccounting accounting) {
  if (data_pages == 0 || (data_pages & (data_pages - 1)) != 0) {
    return Error("ksymbol events: ring of " + std::to_string(data_pages) +
                 " pages is not a power of two");
  }
  ASSIGN_OR_RETURN(std::string online, read_proc_file(sys_root + "/devices/system/cpu/online"));
  ASSIGN_OR_RETURN(std::vector<int> cpus, parse_cpu_list(online));

  std::unique_ptr<PerfKsymbolEvents> self(new PerfKsymbolEvents());
  self->epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!self->epoll_.valid()) return errno_error("ksymbol events: epoll_create1", errno);
  self->scratch_.resize(kMaxRecord);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Every CPU's event exists before any record is read, so partially built state is released
  // by the destructor of `self` on any error below.
  self->cpus_.reserve(cpus.size());
  self->lost_from_records_ = accounting == LostAccounting::kRecordsOnly;
  for (int cpu : cpus) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_DUMMY;
    attr.ksymbol = 1;
    attr.read_format = self->lost_from_records_ ? 0 : PERF_FORMAT_LOST;
    // A timestamp at the end of every record orders one symbol's register and unregister
    // across CPUs.
    attr.sample_id_all = 1;
    attr.sample_type = PERF_SAMPLE_TIME;
    attr.wakeup_events = 1;
    Cpu c;
    c.fd = UniqueFd(perf_event_open(&attr, cpu));
    if (!c.fd.valid() && errno == EINVAL && !self->lost_from_records_ && self->cpus_.empty()) {
      // A kernel before 6.0 does not know PERF_FORMAT_LOST.
      self->lost_from_records_ = true;
      attr.read_format = 0;
      c.fd = UniqueFd(perf_event_open(&attr, cpu));
    }
    if (!c.fd.valid()) {
      return errno_error("ksymbol events: perf_event_open on cpu " + std::to_string(cpu) +
                             " (needs CAP_PERFMON or CAP_SYS_ADMIN)",
                         errno);
    }
    c.mapped = (data_pages + 1) * page;
    void* base = mmap(nullptr, c.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, c.fd.get(), 0);
    if (base == MAP_FAILED) {
      return errno_error("ksymbol events: mmap ring of cpu " + std::to_string(cpu), errno);
    }
    c.base = base;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(self->cpus_.size());
    self->cpus_.push_back(std::move(c));
    if (epoll_ctl(self->epoll_.get(), EPOLL_CTL_ADD, self->cpus_.back().fd.get(), &ev) != 0) {
      return errno_error("ksymbol events: epoll_ctl", errno);
    }
  }
  return self;
}

PerfKsymbolEvents::~PerfKsymbolEvents() {
  for (Cpu& c : cpus_) {
    if (c.base != nullptr) munmap(c.base, c.mapped);
  }
}

void PerfKsymbolEvents::drain(Cpu& cpu) {
  auto* meta = static_cast<perf_event_mmap_page*>(cpu.base);
  const auto* data = static_cast<const uint8_t*>(cpu.base) + meta->data_offset;
  const uint64_t size = meta->data_size;
  // data_head is written by the kernel; the acquire pairs with its release so the records
  // before head are visible.
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    uint64_t avail = head - tail;
    perf_event_header hdr;
    if (avail < sizeof hdr) break;
    auto copy_out = [&](uint8_t* dst, uint64_t from, size_t n) {
      size_t at = static_cast<size_t>(from % size);
      size_t first = std::min<size_t>(n, static_cast<size_t>(size) - at);
      std::memcpy(dst, data + at, first);
      std::memcpy(dst + first, data, n - first);
    };
    copy_out(reinterpret_cast<uint8_t*>(&hdr), tail, sizeof hdr);
    if (hdr.size < sizeof hdr || hdr.size > avail) break;  // not a record: stop, skip the rest
    if (hdr.type == PERF_RECORD_LOST && hdr.size >= kLostCount + sizeof(uint64_t)) {
      uint8_t* rec = scratch_.data();
      copy_out(rec, tail, hdr.size);
      uint64_t lost;
      std::memcpy(&lost, rec + kLostCount, sizeof lost);
      lost_in_records_ += lost;
    }
    if (hdr.type == PERF_RECORD_KSYMBOL && hdr.size >= kKsymName + 1 + sizeof(uint64_t)) {
      uint8_t* rec = scratch_.data();
      copy_out(rec, tail, hdr.size);
      uint16_t type, flags;
      uint32_t len;
      uint64_t addr;
      std::memcpy(&addr, rec + kKsymAddr, sizeof addr);
      std::memcpy(&len, rec + kKsymLen, sizeof len);
      std::memcpy(&type, rec + kKsymType, sizeof type);
      std::memcpy(&flags, rec + kKsymFlags, sizeof flags);
      uint64_t time;
      std::memcpy(&time, rec + hdr.size - sizeof time, sizeof time);  // sample_id: {u64 time}
      const char* name = reinterpret_cast<const char*>(rec + kKsymName);
      size_t name_len = strnlen(name, hdr.size - kKsymName - sizeof time);
      if (type == PERF_RECORD_KSYMBOL_TYPE_BPF) {
        pending_.push_back(Pending{time, addr, len,
                                   (flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER) != 0,
                                   names_.size(), name_len});
        names_.append(name, name_len);
      }
    }
    tail += hdr.size;
  }
  // A malformed header would stall the ring forever; everything up to head is released.
  __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

Result<int> PerfKsymbolEvents::poll(int timeout_ms, const Callback& callback) {
  epoll_event events[16];
  int n = epoll_wait(epoll_.get(), events, 16, timeout_ms);
  if (n < 0 && errno != EINTR) return errno_error("ksymbol events: epoll_wait", errno);
  // Every CPU is drained (not only the ready ones) and the records merged by time: a symbol's
  // register and unregister may come from different CPUs, and applied out of order they would
  // leave a stale symbol behind.
  pending_.clear();
  names_.clear();
  for (Cpu& c : cpus_) drain(c);
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const Pending& a, const Pending& b) { return a.time < b.time; });
  for (const Pending& p : pending_) {
    callback(KsymbolRecord{p.address, p.length, p.unregister,
                           std::string_view(names_).substr(p.name_offset, p.name_length)});
  }
  return static_cast<int>(pending_.size());
}

Result<uint64_t> PerfKsymbolEvents::lost() const {
  if (lost_from_records_) return lost_in_records_;
  uint64_t total = 0;
  for (const Cpu& c : cpus_) {
    uint64_t values[2] = {};  // {value, lost} for read_format == PERF_FORMAT_LOST
    ssize_t n = ::read(c.fd.get(), values, sizeof values);
    if (n != static_cast<ssize_t>(sizeof values)) {
      return errno_error("ksymbol events: read lost count", n < 0 ? errno : EIO);
    }
    total += values[1];
  }
  return total;
}

}  // namespace sonde::symbolize
