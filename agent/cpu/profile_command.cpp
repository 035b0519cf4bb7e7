// `sonde-agent profile`: a CPU profile of this host (or of some processes) for N seconds,
// written as gzipped pprof or folded stacks. The same sampler and symbolizers as the agent's
// /debug/pprof/profile route.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "agent/commands.h"
#include "agent/cpu/cpu_profiler.h"
#include "common/unique_fd.h"

namespace sonde::agent {
namespace {

constexpr const char* kUsage =
    "Usage: sonde-agent profile [--pid PID]... [--seconds N] [--frequency HZ]\n"
    "                           [--format pprof|folded] [--output FILE]\n"
    "\n"
    "Samples the CPU stacks of every process on this host (or only of the --pid processes)\n"
    "for N seconds and writes the profile, symbolized here: ELF symbols, Go pclntab (stripped\n"
    "binaries too, with inlined frames), the kernel's symbols, Node.js JIT frames from\n"
    "/tmp/perf-<pid>.map (node --perf-basic-prof). Needs root (CAP_BPF, CAP_PERFMON).\n"
    "\n"
    "Options:\n"
    "  --pid PID        profile this process (repeatable; default: every process)\n"
    "  --seconds N      how long to sample (1..300, default 10)\n"
    "  --frequency HZ   samples per second per CPU (1..999, default 19)\n"
    "  --format F       pprof (gzipped, for 'go tool pprof', default) or folded\n"
    "                   (\"root;...;leaf count\" lines, for flame-graph tools)\n"
    "  --output FILE    write there instead of standard output\n"
    "  -h, --help       show this help\n";

template <typename T>
bool parse_int(std::string_view s, T& out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "sonde-agent profile: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int profile_main(int argc, char** argv) {
  std::vector<pid_t> pids;
  int seconds = 10;
  uint32_t frequency = cpu::CpuSampler::kDefaultFrequencyHz;
  std::string format = "pprof";
  std::string output;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage_error("unknown option or missing value: " + std::string(a));
    std::string_view v = argv[++i];
    if (a == "--pid") {
      pid_t pid = 0;
      if (!parse_int(v, pid) || pid <= 0) return usage_error("bad --pid " + std::string(v));
      pids.push_back(pid);
    } else if (a == "--seconds") {
      if (!parse_int(v, seconds) || seconds < 1 ||
          seconds > cpu::CpuProfiler::kMaxDuration.count()) {
        return usage_error("--seconds must be 1..300");
      }
    } else if (a == "--frequency") {
      if (!parse_int(v, frequency) || frequency < 1 ||
          frequency > cpu::CpuSampler::kMaxFrequencyHz) {
        return usage_error("--frequency must be 1..999");
      }
    } else if (a == "--format") {
      if (v != "pprof" && v != "folded") return usage_error("--format must be pprof or folded");
      format = v;
    } else if (a == "--output") {
      output = v;
    } else {
      return usage_error("unknown option " + std::string(a));
    }
  }

  cpu::ProfilerOptions options;
  options.frequency_hz = frequency;
  options.all_processes = pids.empty();
  auto profiler = cpu::CpuProfiler::start(options);
  if (!profiler.ok()) {
    std::fprintf(stderr, "sonde-agent profile: %s\n", profiler.error().message().c_str());
    return 1;
  }
  for (pid_t pid : pids) {
    if (Status s = (*profiler)->select_pid(pid, {}); !s.ok()) {
      std::fprintf(stderr, "sonde-agent profile: %s\n", s.error().message().c_str());
      return 1;
    }
  }
  auto profile = (*profiler)->collect(std::chrono::seconds(seconds), {});
  if (!profile.ok()) {
    std::fprintf(stderr, "sonde-agent profile: %s\n", profile.error().message().c_str());
    return 1;
  }
  std::string data;
  if (format == "folded") {
    data = (*profile)->folded();
  } else {
    auto bytes = (*profile)->pprof_gzip();
    if (!bytes.ok()) {
      std::fprintf(stderr, "sonde-agent profile: %s\n", bytes.error().message().c_str());
      return 1;
    }
    data = std::move(bytes).value();
  }
  UniqueFd file;
  int fd = STDOUT_FILENO;
  if (!output.empty()) {
    file.reset(::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!file.valid()) {
      std::fprintf(stderr, "sonde-agent profile: open %s: %s\n", output.c_str(),
                   std::strerror(errno));
      return 1;
    }
    fd = file.get();
  }
  if (!write_all(fd, data)) {
    std::fprintf(stderr, "sonde-agent profile: write: %s\n", std::strerror(errno));
    return 1;
  }
  cpu::CpuProfiler::Stats stats = (*profiler)->stats();
  std::fprintf(stderr,
               "sonde-agent profile: %llu samples, %zu distinct stacks; lost in the kernel: %llu "
               "samples, %llu stacks; symbol tables kept: %zu binaries, %zu bytes\n",
               static_cast<unsigned long long>((*profile)->total_samples()),
               (*profile)->distinct_stacks(), static_cast<unsigned long long>(stats.drops.samples),
               static_cast<unsigned long long>(stats.drops.stacks), stats.binaries.entries,
               stats.binaries.bytes);
  return 0;
}

}  // namespace sonde::agent
