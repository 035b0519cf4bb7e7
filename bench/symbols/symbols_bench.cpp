// Benchmarks of the symbol engine on /usr/bin/node's six libuv probe targets: cold resolve
// (map, parse, one pass, decode, unmap), warm cache lookup, the per-pid path through the
// cache, and 200 pids reaching one binary through distinct paths. Heap use is measured by
// replacing the global operator new/delete of this binary; the file mapping is reported
// separately as peak RSS, since its pages are the page cache's, not the agent's heap.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/limits.h"
#include "agent/symbols/probe_target_cache.h"
#include "agent/symbols/return_sites.h"
#include "agent/symbols/symbol_resolver.h"

namespace {

std::atomic<uint64_t> g_allocated{0};  // bytes ever allocated
std::atomic<uint64_t> g_allocations{0};
std::atomic<int64_t> g_live{0};  // bytes allocated and not yet freed
std::atomic<int64_t> g_peak{0};

void* counted_alloc(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  const auto usable = static_cast<int64_t>(malloc_usable_size(p));
  g_allocated += usable;
  ++g_allocations;
  const int64_t live = g_live += usable;
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void counted_free(void* p) {
  if (p == nullptr) return;
  g_live -= static_cast<int64_t>(malloc_usable_size(p));
  std::free(p);
}

}  // namespace

void* operator new(size_t n) {
  return counted_alloc(n);
}
void* operator new[](size_t n) {
  return counted_alloc(n);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, size_t) noexcept {
  counted_free(p);
}

namespace {

using sonde::symbols::OpenBinary;
using sonde::symbols::ProbeTargetCache;

constexpr const char* kNode = "/usr/bin/node";
const std::vector<std::string> kNames = {"uv__io_poll", "uv__stream_io", "uv__async_io",
                                         "uv__poll_io", "uv__server_io", "uv__udp_io"};
constexpr int kPids = 200;

// Distinct per-pid paths to one file, as /proc/<pid>/root/usr/bin/node would be.
class PidPaths {
 public:
  PidPaths() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sonde-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir_ = tmpl;
    for (int pid = 0; pid < kPids; ++pid) {
      const auto p = dir_ / std::to_string(1000 + pid) / "root" / "node";
      std::filesystem::create_directories(p.parent_path());
      std::filesystem::create_symlink(kNode, p);
      paths_.push_back(p.string());
    }
  }
  ~PidPaths() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> paths_;
};

void report_heap(benchmark::State& state, uint64_t allocated_before, uint64_t allocations_before) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["heap_bytes_per_iter"] =
      static_cast<double>(g_allocated.load() - allocated_before) / iters;
  state.counters["allocs_per_iter"] =
      static_cast<double>(g_allocations.load() - allocations_before) / iters;
}

void BM_ColdResolve(benchmark::State& state) {
  const uint64_t a0 = g_allocated, n0 = g_allocations;
  for (auto _ : state) {
    auto targets = sonde::symbols::resolve_file(kNode, kNames);
    if (!targets.ok()) {
      state.SkipWithError(targets.error().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(targets->data());
  }
  report_heap(state, a0, n0);
}
BENCHMARK(BM_ColdResolve)->Unit(benchmark::kMillisecond);

void BM_WarmLookup(benchmark::State& state) {
  ProbeTargetCache cache;
  auto binary = OpenBinary::open(kNode);
  if (!binary.ok() || !cache.resolve(*binary, kNames).ok()) {
    state.SkipWithError("cannot resolve /usr/bin/node");
    return;
  }
  const auto identity = binary->identity();
  const uint64_t a0 = g_allocated, n0 = g_allocations;
  for (auto _ : state) {
    auto hit = cache.lookup(identity, kNames);
    benchmark::DoNotOptimize(hit);
  }
  report_heap(state, a0, n0);
}
BENCHMARK(BM_WarmLookup)->Unit(benchmark::kNanosecond);

// A new pid of a known binary: open its path, identify the file, answer from the cache.
void BM_WarmResolveByPath(benchmark::State& state) {
  ProbeTargetCache cache;
  if (!cache.resolve(kNode, kNames).ok()) {
    state.SkipWithError("cannot resolve /usr/bin/node");
    return;
  }
  PidPaths pids;
  size_t i = 0;
  const uint64_t a0 = g_allocated, n0 = g_allocations;
  for (auto _ : state) {
    auto r = cache.resolve(pids.paths()[i++ % kPids], kNames);
    benchmark::DoNotOptimize(r);
  }
  report_heap(state, a0, n0);
  state.counters["parses"] = static_cast<double>(cache.stats().parses);
}
BENCHMARK(BM_WarmResolveByPath)->Unit(benchmark::kMicrosecond);

void BM_200PidsDistinctPaths(benchmark::State& state) {
  PidPaths pids;
  uint64_t parses = 0;
  const uint64_t a0 = g_allocated, n0 = g_allocations;
  for (auto _ : state) {
    ProbeTargetCache cache;
    for (const auto& p : pids.paths()) {
      auto r = cache.resolve(p, kNames);
      if (!r.ok()) {
        state.SkipWithError(r.error().message().c_str());
        return;
      }
    }
    parses = cache.stats().parses;
  }
  report_heap(state, a0, n0);
  state.counters["parses"] = static_cast<double>(parses);
}
BENCHMARK(BM_200PidsDistinctPaths)->Unit(benchmark::kMillisecond);

// The most decoding one function can cost: kMaxDecodedFunctionBytes of one-byte NOPs (the
// most instructions a function at the cap can hold) and a RET, swept by the x86-64 decoder.
void BM_DecodeFunctionAtCap(benchmark::State& state) {
  std::vector<uint8_t> code(sonde::symbols::kMaxDecodedFunctionBytes, 0x90);
  code.back() = 0xc3;
  for (auto _ : state) {
    auto sites = sonde::symbols::find_return_sites(sonde::symbols::Machine::kX86_64, code, 0);
    if (sites.status != sonde::symbols::ReturnSiteStatus::kFound) {
      state.SkipWithError("the function at the cap was not decoded");
      return;
    }
    benchmark::DoNotOptimize(sites.returns.data());
  }
}
BENCHMARK(BM_DecodeFunctionAtCap)->Unit(benchmark::kMillisecond);

// kB value of a /proc/self/status field.
long status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stol(line.substr(prefix.size()));
  }
  return -1;
}

// Peak and retained memory of one cold resolve into a cache, measured once outside the timing
// loops: heap via the counting allocator, RSS via VmHWM after resetting it (clear_refs 5).
void report_memory() {
  // A first resolve outside the measurement faults in this program's code and the decoder's
  // tables, which every later resolve shares; what is measured then is per binary.
  if (!sonde::symbols::resolve_file(kNode, kNames).ok()) return;
  ProbeTargetCache cache;
  std::ofstream("/proc/self/clear_refs") << "5";
  const long rss_before = status_kb("VmRSS");
  const long anon_before = status_kb("RssAnon");
  const long file_before = status_kb("RssFile");
  const int64_t live_before = g_live.load();
  g_peak = live_before;
  {
    auto r = cache.resolve(kNode, kNames);
    if (!r.ok()) {
      std::fprintf(stderr, "memory: %s\n", r.error().message().c_str());
      return;
    }
  }
  const int64_t retained = g_live.load() - live_before;
  const int64_t peak = g_peak.load() - live_before;
  const long hwm = status_kb("VmHWM");
  std::printf("\nmemory of one cold resolve of the six names into a cache (%s):\n", kNode);
  std::printf("  peak heap during resolve        %8lld bytes\n", static_cast<long long>(peak));
  std::printf("  retained heap (cache, 6 names)  %8lld bytes\n", static_cast<long long>(retained));
  std::printf(
      "  peak RSS increase (incl. the    %8ld KiB  (file-backed pages of the mapping,\n"
      "  mapped symbol/string tables)             released by munmap)\n",
      hwm - rss_before);
  std::printf(
      "  RSS after resolve - before      %8ld KiB  (anonymous %ld KiB, file-backed %ld KiB)\n",
      status_kb("VmRSS") - rss_before, status_kb("RssAnon") - anon_before,
      status_kb("RssFile") - file_before);
  std::printf("  cache entries / parses          %8zu / %llu\n", cache.stats().entries,
              static_cast<unsigned long long>(cache.stats().parses));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (::access(kNode, R_OK) != 0) {
    std::fprintf(stderr, "%s is not readable; the symbol benchmarks need it\n", kNode);
    return 1;
  }
  report_memory();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
