// Test helper: an Attachment that counts the live ones, so a test sees when SharedUprobes
// detaches one (on its detach thread: hence the atomic).
#pragma once

#include <atomic>

#include "agent/kernel/bpf_helpers.h"

namespace sonde::agent::testing {

class CountingAttachment final : public Attachment {
 public:
  explicit CountingAttachment(std::atomic<int>& live) : live_(live) { ++live_; }
  ~CountingAttachment() override { --live_; }

 private:
  std::atomic<int>& live_;
};

}  // namespace sonde::agent::testing
