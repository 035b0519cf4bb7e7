// Small kernel-handle helpers shared by the agent's BPF features.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

struct bpf_link;
struct bpf_map;
struct bpf_program;

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

// Attaches `program` as a uprobe at `file_offset` of the file at `path`, for every process
// (pid -1): callers filter per process in the kernel. The error names program, file, offset.
Result<std::unique_ptr<Attachment>> attach_uprobe(bpf_program* program, const std::string& path,
                                                  uint64_t file_offset);

// The sum over CPUs of a u64 in a BPF_MAP_TYPE_PERCPU_ARRAY (0 when the lookup fails).
uint64_t sum_percpu_counter(const bpf_map* map, uint32_t key);

}  // namespace sonde::agent
