// Small kernel-handle helpers shared by the agent's BPF features.
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

struct bpf_link;
struct bpf_map;
struct bpf_program;
struct ring_buffer;

namespace sonde::agent {

// Something attached in the kernel; destroying it detaches. Destructors never throw.
class Attachment {
 public:
  virtual ~Attachment() = default;
};

// A libbpf link (uprobe, tracepoint, ...), destroyed with the object.
class BpfLink : public Attachment {
 public:
  explicit BpfLink(bpf_link* link) : link_(link) {}
  ~BpfLink() override;
  BpfLink(const BpfLink&) = delete;
  BpfLink& operator=(const BpfLink&) = delete;

 private:
  bpf_link* link_;
};

// The pid namespace whose numbers the agent's /proc shows, for the programs that report or key
// by pid (bpf/pidns.bpf.h): the namespace of /proc's pid 1 (the init of the procfs's namespace),
// else the agent's own. Computed once per process; `initial` when it is the initial namespace
// (or cannot be read: then nothing is translated, as before namespaces were considered).
struct PidNamespace {
  uint64_t dev = 0;  // nsfs identity, as stat() of /proc/<pid>/ns/pid reports it
  uint64_t ino = 0;  // 0: the initial namespace
  bool initial() const { return ino == 0; }
  std::string describe() const;  // "initial" or "pid:[<ino>]"
};
const PidNamespace& agent_pid_namespace();
// Sets a skeleton's pidns_dev/pidns_ino (bpf/pidns.bpf.h) before load.
template <class Rodata>
void configure_pid_namespace(Rodata* rodata) {
  rodata->pidns_dev = agent_pid_namespace().dev;
  rodata->pidns_ino = agent_pid_namespace().ino;
}

// The sum over CPUs of a u64 in a BPF_MAP_TYPE_PERCPU_ARRAY (0 when the lookup fails).
uint64_t sum_percpu_counter(const bpf_map* map, uint32_t key);

// Every key of the BPF map `fd` (at most `limit`), collected before any is deleted (deleting
// during get_next_key iteration restarts it).
template <typename Key>
std::vector<Key> map_keys(int fd, size_t limit) {
  std::vector<Key> keys;
  Key key{};
  Key next{};
  const Key* prev = nullptr;
  while (keys.size() < limit && bpf_map_get_next_key(fd, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  return keys;
}

// A BPF ring buffer's consumer: poll() hands every available record to the callback, on the
// polling thread. Records shorter than the struct a feature expects are the feature's to skip.
class RingBufferReader {
 public:
  using Callback = std::function<void(std::span<const uint8_t>)>;

  // `what` names the feature in errors ("process events").
  static Result<std::unique_ptr<RingBufferReader>> open(const bpf_map* map, std::string what,
                                                        Callback callback);
  ~RingBufferReader();

  // Waits up to timeout_ms; returns the records delivered. EINTR counts as none.
  Result<int> poll(int timeout_ms);

 private:
  RingBufferReader(std::string what, Callback callback)
      : what_(std::move(what)), callback_(std::move(callback)) {}
  static int on_sample(void* ctx, void* data, size_t size);

  std::string what_;
  Callback callback_;
  ring_buffer* ring_ = nullptr;
};

}  // namespace sonde::agent
