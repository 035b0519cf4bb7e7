#include "agent/kernel/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <string>

#include "common/log.h"

namespace sonde::agent {
namespace {

int forward(enum libbpf_print_level level, const char* format, va_list args) {
  log::Level ours = level == LIBBPF_WARN ? log::Level::kWarn : log::Level::kDebug;
  if (!log::enabled(ours)) return 0;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  std::string msg(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  log::write(ours, "libbpf", {{"detail", msg}});
  return n;
}

}  // namespace

void route_libbpf_log() {
  libbpf_set_print(forward);
}

}  // namespace sonde::agent
