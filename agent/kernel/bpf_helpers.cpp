#include "agent/kernel/bpf_helpers.h"

#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

namespace sonde::agent {

namespace {

// The initial pid namespace's inode number (PROC_PID_INIT_INO, fixed since Linux 3.8).
constexpr uint64_t kInitialPidNamespaceIno = 0xEFFFFFFCu;

PidNamespace read_pid_namespace() {
  struct stat st {};
  if (stat("/proc/1/ns/pid", &st) != 0 && stat("/proc/self/ns/pid", &st) != 0) return {};
  if (st.st_ino == kInitialPidNamespaceIno) return {};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

}  // namespace

const PidNamespace& agent_pid_namespace() {
  static const PidNamespace ns = read_pid_namespace();
  return ns;
}

std::string PidNamespace::describe() const {
  return initial() ? "initial" : "pid:[" + std::to_string(ino) + "]";
}

BpfLink::~BpfLink() {
  bpf_link__destroy(link_);
}

uint64_t sum_percpu_counter(const bpf_map* map, uint32_t key) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return 0;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  if (bpf_map__lookup_elem(map, &key, sizeof key, per_cpu.data(), per_cpu.size() * sizeof(uint64_t),
                           0) != 0) {
    return 0;
  }
  uint64_t total = 0;
  for (auto n : per_cpu) total += n;
  return total;
}

Result<std::unique_ptr<RingBufferReader>> RingBufferReader::open(const bpf_map* map,
                                                                 std::string what,
                                                                 Callback callback) {
  std::unique_ptr<RingBufferReader> self(
      new RingBufferReader(std::move(what), std::move(callback)));
  self->ring_ = ring_buffer__new(bpf_map__fd(map), &on_sample, self.get(), nullptr);
  if (!self->ring_) return errno_error(self->what_ + ": open ring buffer", errno);
  return self;
}

RingBufferReader::~RingBufferReader() {
  ring_buffer__free(ring_);
}

int RingBufferReader::on_sample(void* ctx, void* data, size_t size) {
  static_cast<RingBufferReader*>(ctx)->callback_({static_cast<const uint8_t*>(data), size});
  return 0;
}

Result<int> RingBufferReader::poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n == -EINTR) return 0;
  if (n < 0) return errno_error(what_ + ": poll ring buffer", -n);
  return n;
}

}  // namespace sonde::agent
