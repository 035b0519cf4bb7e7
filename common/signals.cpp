#include "common/signals.h"

#include <atomic>

namespace sonde {
namespace {

// A signal handler may only touch lock-free atomics.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_signal(int sig) {
  g_stop_signal.store(sig);
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool StopSignals::requested() const {
  return g_stop_signal.load() != 0;
}
int StopSignals::signal() const {
  return g_stop_signal.load();
}

}  // namespace sonde
