// `sonde-agent profile`: a CPU profile of this host (or of some processes) for N seconds,
// written as gzipped pprof or folded stacks. The same sampler and symbolizers as the agent's
// /debug/pprof/profile route.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/commands.h"
#include "agent/cpu/cpu_profiler.h"
#include "common/cli.h"
#include "common/unique_fd.h"

namespace sonde::agent {
namespace {

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
  uint32_t frequency = stacks::CpuSampler::kDefaultFrequencyHz;
  std::string format = "pprof";
  std::string output;
  CLI::App app{
      "Samples the CPU stacks of every process on this host (or only of the --pid processes) "
      "and writes the profile, symbolized here: ELF symbols, Go pclntab (stripped binaries too, "
      "with inlined frames), the kernel's symbols, Node.js JIT frames from /tmp/perf-<pid>.map "
      "(node --perf-basic-prof). Needs root (CAP_BPF, CAP_PERFMON).",
      "sonde-agent profile"};
  app.add_option("--pid", pids, "profile this process (repeatable; default: every process)")
      ->check(cli::positive());
  app.add_option("--seconds", seconds, "how long to sample")
      ->check(CLI::Range(1, static_cast<int>(cpu::CpuProfiler::kMaxDuration.count())))
      ->capture_default_str();
  app.add_option("--frequency", frequency, "samples per second per CPU")
      ->check(CLI::Range(1u, stacks::CpuSampler::kMaxFrequencyHz))
      ->capture_default_str();
  app.add_option("--format", format,
                 "pprof (gzipped, for 'go tool pprof') or folded (\"root;...;leaf count\" "
                 "lines, for flame-graph tools)")
      ->check(CLI::IsMember({"pprof", "folded"}))
      ->capture_default_str();
  app.add_option("--output", output, "write there instead of standard output");
  if (auto exit_code = cli::parse(app, argc, argv)) return *exit_code;

  cpu::ProfilerOptions options;
  options.frequency_hz = frequency;
  options.all_processes = pids.empty();
  auto profiler = cpu::CpuProfiler::start(options);
  if (!profiler.ok()) {
    (void)std::fprintf(stderr, "sonde-agent profile: %s\n", profiler.error().message().c_str());
    return 1;
  }
  for (pid_t pid : pids) {
    if (Status s = (*profiler)->select_pid(pid, {}); !s.ok()) {
      (void)std::fprintf(stderr, "sonde-agent profile: %s\n", s.error().message().c_str());
      return 1;
    }
  }
  auto profile = (*profiler)->collect(std::chrono::seconds(seconds), {});
  if (!profile.ok()) {
    (void)std::fprintf(stderr, "sonde-agent profile: %s\n", profile.error().message().c_str());
    return 1;
  }
  std::string data;
  if (format == "folded") {
    data = (*profile)->folded();
  } else {
    auto bytes = (*profile)->pprof_gzip();
    if (!bytes.ok()) {
      (void)std::fprintf(stderr, "sonde-agent profile: %s\n", bytes.error().message().c_str());
      return 1;
    }
    data = std::move(bytes).value();
  }
  UniqueFd file;
  int fd = STDOUT_FILENO;
  if (!output.empty()) {
    file.reset(::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!file.valid()) {
      (void)std::fprintf(stderr, "sonde-agent profile: open %s: %s\n", output.c_str(),
                         errno_text(errno).c_str());
      return 1;
    }
    fd = file.get();
  }
  if (!write_all(fd, data)) {
    (void)std::fprintf(stderr, "sonde-agent profile: write: %s\n", errno_text(errno).c_str());
    return 1;
  }
  cpu::CpuProfiler::Stats stats = (*profiler)->stats();
  (void)std::fprintf(
      stderr,
      "sonde-agent profile: %llu samples, %zu distinct stacks; lost in the kernel: %llu "
      "samples, %llu stacks, %llu user stacks missing; symbol tables kept: %zu binaries, %zu "
      "bytes; JavaScript names "
      "kept: %zu bytes for %zu node processes\n",
      static_cast<unsigned long long>((*profile)->total_samples()), (*profile)->distinct_stacks(),
      static_cast<unsigned long long>(stats.drops.samples),
      static_cast<unsigned long long>(stats.drops.stacks),
      static_cast<unsigned long long>(stats.drops.user_stacks), stats.binaries.entries,
      stats.binaries.bytes, stats.js_name_cache_bytes, stats.js_node_processes);
  return 0;
}

}  // namespace sonde::agent
