// Go pclntab lookups (name + file + line, and with inlined frames), ELF symbol-table lookups
// and kallsyms build/lookup.
// Allocations are counted by replacing operator new in this binary and reported per lookup.
//
// Inputs: SONDE_BENCH_GO_BINARY (default: Debian's stripped Go 1.19 compiler, a 16 MB Go
// binary) and /proc/kallsyms (root sees real addresses).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "agent/symbolize/elf_symbolizer.h"
#include "agent/symbolize/go_binary.h"
#include "agent/symbolize/kallsyms.h"
#include "agent/symbolize/tests/allocation_counter.h"

namespace sonde::symbolize {
namespace {

std::string go_binary_path() {
  const char* env = std::getenv("SONDE_BENCH_GO_BINARY");
  return env ? env : "/usr/lib/go-1.19/pkg/tool/linux_amd64/compile";
}

const GoBinary& go_binary() {
  static auto binary = GoBinary::open(go_binary_path());
  if (!binary.ok()) {
    fprintf(stderr, "%s\n", binary.error().message().c_str());
    std::abort();
  }
  return **binary;
}

std::vector<uint64_t> random_pcs(const GoPclntab& t, size_t n) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> pcs(n);
  for (auto& pc : pcs) pc = t.min_pc() + rng() % (t.max_pc() - t.min_pc());
  return pcs;
}

void BM_GoLookup(benchmark::State& state) {
  const GoPclntab& t = go_binary().pclntab();
  auto pcs = random_pcs(t, 10000);
  size_t i = 0;
  uint64_t before = testing::allocations();
  for (auto _ : state) {
    auto f = t.lookup(pcs[i++ % pcs.size()]);
    benchmark::DoNotOptimize(f);
  }
  state.counters["allocs_per_lookup"] =
      benchmark::Counter(static_cast<double>(testing::allocations() - before) /
                         static_cast<double>(state.iterations()));
  state.counters["functions"] = t.function_count();
}
BENCHMARK(BM_GoLookup);

void BM_GoLookupWithInlinedFrames(benchmark::State& state) {
  const GoPclntab& t = go_binary().pclntab();
  auto pcs = random_pcs(t, 10000);
  std::array<GoFrame, 16> frames;
  size_t i = 0, total = 0;
  uint64_t before = testing::allocations();
  for (auto _ : state) {
    total += t.lookup_frames(pcs[i++ % pcs.size()], frames);
    benchmark::DoNotOptimize(frames);
  }
  state.counters["allocs_per_lookup"] =
      benchmark::Counter(static_cast<double>(testing::allocations() - before) /
                         static_cast<double>(state.iterations()));
  state.counters["frames_per_lookup"] =
      static_cast<double>(total) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_GoLookupWithInlinedFrames);

void BM_GoOpen(benchmark::State& state) {
  for (auto _ : state) {
    auto b = GoBinary::open(go_binary_path());
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_GoOpen)->Unit(benchmark::kMillisecond);

// What the Go TLS verdict opens per new binary (go_tls_plan.cpp): no lookup index, no inline
// trees, two name lookups.
void BM_GoOpenForNames(benchmark::State& state) {
  GoBinaryOptions options;
  options.build_index = false;
  options.inline_trees = false;
  for (auto _ : state) {
    auto b = GoBinary::open(go_binary_path(), options);
    if (b.ok()) benchmark::DoNotOptimize((*b)->pclntab().find_function("crypto/tls.(*Conn).Read"));
  }
}
BENCHMARK(BM_GoOpenForNames)->Unit(benchmark::kMillisecond);

// ELF symbol tables: /usr/bin/node (or SONDE_BENCH_ELF_BINARY) at the addresses listed in
// SONDE_BENCH_ELF_ADDRS (one hex address per line, the same file run.sh feeds to
// llvm-symbolizer and addr2line).
std::string elf_binary_path() {
  const char* env = std::getenv("SONDE_BENCH_ELF_BINARY");
  return env ? env : "/usr/bin/node";
}

std::vector<uint64_t> elf_addresses() {
  std::vector<uint64_t> out;
  if (const char* path = std::getenv("SONDE_BENCH_ELF_ADDRS")) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) out.push_back(std::stoull(line, nullptr, 16));
  }
  return out;
}

void BM_ElfLookup(benchmark::State& state) {
  static auto sym = ElfSymbolizer::open(elf_binary_path());
  auto addrs = elf_addresses();
  if (!sym.ok() || addrs.empty()) {
    state.SkipWithError("set SONDE_BENCH_ELF_ADDRS (run.sh does)");
    return;
  }
  size_t i = 0;
  uint64_t before = testing::allocations();
  for (auto _ : state) {
    auto hit = (*sym)->lookup(addrs[i++ % addrs.size()]);
    benchmark::DoNotOptimize(hit);
  }
  state.counters["allocs_per_lookup"] =
      benchmark::Counter(static_cast<double>(testing::allocations() - before) /
                         static_cast<double>(state.iterations()));
  state.counters["symbols"] = static_cast<double>((*sym)->size());
  state.counters["table_bytes_per_symbol"] =
      static_cast<double>((*sym)->table_bytes()) / static_cast<double>((*sym)->size());
}
BENCHMARK(BM_ElfLookup);

void BM_ElfOpen(benchmark::State& state) {
  for (auto _ : state) {
    auto sym = ElfSymbolizer::open(elf_binary_path());
    benchmark::DoNotOptimize(sym);
  }
}
BENCHMARK(BM_ElfOpen)->Unit(benchmark::kMillisecond);

const std::string& kallsyms_text() {
  static std::string text = [] {
    auto t = read_proc_file("/proc/kallsyms");
    return t.ok() ? *t : std::string();
  }();
  return text;
}

void BM_KallsymsParse(benchmark::State& state) {
  size_t symbols = 0, table_bytes = 0, name_bytes = 0;
  for (auto _ : state) {
    auto t = KallsymsTable::parse(kallsyms_text());
    symbols = t->size();
    table_bytes = t->table_bytes();
    name_bytes = t->name_bytes();
  }
  state.counters["symbols"] = static_cast<double>(symbols);
  state.counters["table_bytes_per_symbol"] =
      static_cast<double>(table_bytes) / static_cast<double>(symbols);
  state.counters["name_bytes_per_symbol"] =
      static_cast<double>(name_bytes) / static_cast<double>(symbols);
}
BENCHMARK(BM_KallsymsParse)->Unit(benchmark::kMillisecond);

void BM_KallsymsReadAndParse(benchmark::State& state) {
  for (auto _ : state) {
    auto t = KallsymsTable::read("/proc");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_KallsymsReadAndParse)->Unit(benchmark::kMillisecond);

void BM_KallsymsLookup(benchmark::State& state) {
  static auto table = KallsymsTable::parse(kallsyms_text());
  std::mt19937_64 rng(2);
  std::vector<uint64_t> addrs(10000);
  for (auto& a : addrs) {
    auto s = table->at(rng() % table->size());
    a = s.address + rng() % 64;
  }
  size_t i = 0;
  uint64_t before = testing::allocations();
  for (auto _ : state) {
    auto s = table->lookup(addrs[i++ % addrs.size()]);
    benchmark::DoNotOptimize(s);
  }
  state.counters["allocs_per_lookup"] =
      benchmark::Counter(static_cast<double>(testing::allocations() - before) /
                         static_cast<double>(state.iterations()));
}
BENCHMARK(BM_KallsymsLookup);

}  // namespace
}  // namespace sonde::symbolize

BENCHMARK_MAIN();
