// Clock: the time the monitors and the runtime read, behind an interface so unit tests can move
// it (grace periods, exits at a known instant) without sleeping.
//
// Every value is CLOCK_MONOTONIC in nanoseconds, the clock of bpf_ktime_get_ns(): kernel and
// user-space timestamps compare directly. Thread-safe.
#pragma once

#include <cstdint>

namespace sonde::agent {

// CLOCK_MONOTONIC in nanoseconds.
uint64_t monotonic_ns();

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t now_ns() const = 0;
};

// The real monotonic clock (shared: it has no state).
const Clock& monotonic_clock();

}  // namespace sonde::agent
