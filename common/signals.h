// StopSignals: turns SIGINT and SIGTERM into a flag a main loop polls, for graceful shutdown
// (destructors run, BPF links are detached). Install one per process, in main's thread; the
// previous handlers are restored when it is destroyed.
#pragma once

#include <chrono>
#include <csignal>

namespace sonde {

class StopSignals {
 public:
  using Clock = std::chrono::steady_clock;

  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  // The signal that asked to stop, 0 if none yet.
  int signal() const;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace sonde
