// AttachDelays: how long after a process's exec its binary's Go TLS probes were attached, for the
// processes whose binary was attached for them (a binary not attached before, or no longer: its
// probes were detached). A process of a binary already attached (or kept after its last exit) is
// counted from its first instruction and is not observed; neither is one found by a /proc scan
// (no exec seen), nor one that exited before the attach. A Go program whose first crypto/tls
// call comes sooner after exec than this delay is not counted for the calls before it
// (docs/go-tls.md, "A binary never seen before"). Exported as
// sonde_agent_gotls_attach_delay_seconds.
//
// Bounds: a fixed set of buckets; memory does not grow. Thread-safe (one mutex).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace sonde::agent {

class AttachDelays {
 public:
  // Upper bounds, seconds: around the kernel's RCU grace period (~10 ms) that the first uprobe
  // registration of a burst waits for, and the agent's ~3 ms of parsing.
  static constexpr std::array<double, 10> kBoundsSeconds = {0.001, 0.0025, 0.005, 0.0075, 0.01,
                                                            0.015, 0.025,  0.05,  0.1,    1.0};
  struct Snapshot {
    std::array<uint64_t, kBoundsSeconds.size() + 1> counts{};  // non-cumulative; last: +Inf
    double sum_seconds = 0;
    uint64_t count = 0;
  };

  // One attach, `exec_ns` and `attached_ns` on the same clock (CLOCK_MONOTONIC); an attach that
  // seems to precede its exec counts as 0.
  void observe(uint64_t exec_ns, uint64_t attached_ns) {
    const double seconds =
        attached_ns > exec_ns ? static_cast<double>(attached_ns - exec_ns) / 1e9 : 0.0;
    size_t bucket = kBoundsSeconds.size();
    for (size_t i = 0; i < kBoundsSeconds.size(); ++i) {
      if (seconds <= kBoundsSeconds[i]) {
        bucket = i;
        break;
      }
    }
    std::lock_guard lock(mu_);
    data_.counts[bucket]++;
    data_.sum_seconds += seconds;
    data_.count++;
  }

  Snapshot snapshot() const {
    std::lock_guard lock(mu_);
    return data_;
  }

 private:
  mutable std::mutex mu_;
  Snapshot data_;
};

}  // namespace sonde::agent
