// LiveKernelSymbols on the real kernel: needs root (ctest label: bpf). Loads and unloads tiny
// socket filters and checks their `bpf_prog_<tag>_<name>` symbols against /proc/kallsyms.
// Programs are loaded on the test's CPU, so the one-page ring of that CPU is what overflows.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "agent/symbolize/kallsyms.h"
#include "agent/symbolize/live_kernel_symbols.h"
#include "common/unique_fd.h"

namespace sonde::symbolize {
namespace {

struct LoadedProg {
  UniqueFd fd;
  uint64_t address = 0;
  std::string symbol;  // as kallsyms names it
};

// "r0 = 0; exit": the smallest program the verifier accepts.
LoadedProg load_socket_filter(const char* name) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[1].code = BPF_JMP | BPF_EXIT;
  LoadedProg p;
  p.fd = UniqueFd(bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, name, "GPL", insns, 2, nullptr));
  if (!p.fd.valid()) return p;
  bpf_prog_info info{};
  uint64_t ksym = 0;
  info.nr_jited_ksyms = 1;
  info.jited_ksyms = reinterpret_cast<uintptr_t>(&ksym);
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(p.fd.get(), &info, &len) != 0) return p;
  char tag[17];
  for (size_t i = 0; i < 8; ++i) (void)snprintf(tag + 2 * i, 3, "%02x", info.tag[i]);
  p.address = ksym;
  p.symbol = std::string("bpf_prog_") + tag + "_" + name;
  return p;
}

// Ground truth: is "<address> t <symbol>\t[bpf]" a line of /proc/kallsyms right now?
bool in_proc_kallsyms(uint64_t address, const std::string& symbol) {
  auto text = read_proc_file("/proc/kallsyms");
  if (!text.ok()) return false;
  char addr[32];
  (void)snprintf(addr, sizeof addr, "%016lx", static_cast<unsigned long>(address));
  return text->find(std::string(addr) + " t " + symbol + "\t[bpf]") != std::string::npos;
}

bool poll_until(LiveKernelSymbols& live, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto n = live.poll(50);
    if (!n.ok()) return false;
    if (done()) return true;
  }
  return false;
}

bool resolves_to(const LiveKernelSymbols& live, uint64_t address, const std::string& symbol) {
  auto s = live.lookup(address);
  return s && s->name == symbol && s->offset == 0 && s->module == "bpf";
}

class LiveKernelSymbolsBpf : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for BPF and kernel addresses";
  }
};

TEST_F(LiveKernelSymbolsBpf, FollowsLoadAndUnloadWithoutFullReread) {
  auto live = LiveKernelSymbols::start();
  ASSERT_TRUE(live.ok()) << live.error().message();
  LiveKernelSymbols& l = **live;
  EXPECT_EQ(l.full_reads(), 1u);

  LoadedProg prog = load_socket_filter("sonde_ksym_t");
  ASSERT_TRUE(prog.fd.valid()) << "bpf_prog_load failed";
  ASSERT_NE(prog.address, 0u);
  ASSERT_TRUE(in_proc_kallsyms(prog.address, prog.symbol)) << prog.symbol;

  EXPECT_TRUE(poll_until(l, [&] { return resolves_to(l, prog.address, prog.symbol); }))
      << prog.symbol << " never appeared";
  auto inside = l.lookup(prog.address + 4);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->name, prog.symbol);
  EXPECT_EQ(inside->offset, 4u);

  prog.fd.reset();
  EXPECT_TRUE(poll_until(l, [&] { return !resolves_to(l, prog.address, prog.symbol); }))
      << prog.symbol << " never disappeared";
  EXPECT_FALSE(in_proc_kallsyms(prog.address, prog.symbol));
  EXPECT_EQ(l.full_reads(), 1u) << "an incremental update fell back to a full read";
  EXPECT_EQ(l.lost_events(), 0u);
}

TEST_F(LiveKernelSymbolsBpf, DroppedEventsTriggerExactlyOneFullRead) {
  LiveKernelSymbolsOptions options;
  options.ring_pages = 1;  // one page per CPU: room for about 60 records
  auto live = LiveKernelSymbols::start(options);
  ASSERT_TRUE(live.ok()) << live.error().message();
  LiveKernelSymbols& l = **live;
  ASSERT_EQ(l.full_reads(), 1u);

  std::vector<LoadedProg> progs;
  for (int i = 0; i < 200; ++i) {
    progs.push_back(load_socket_filter(("sonde_ovf_" + std::to_string(i)).c_str()));
    ASSERT_TRUE(progs.back().fd.valid());
  }
  auto n = l.poll(0);
  ASSERT_TRUE(n.ok()) << n.error().message();
  EXPECT_GT(l.lost_events(), 0u);
  EXPECT_EQ(l.full_reads(), 2u);
  // The full read saw every program, including those whose events were dropped.
  for (const auto& p : progs) EXPECT_TRUE(resolves_to(l, p.address, p.symbol)) << p.symbol;

  // Nothing new dropped: further polls do not read again.
  n = l.poll(0);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(l.full_reads(), 2u);
}

// Kernels before 6.0 have no exact lost count; drops then show as a PERF_RECORD_LOST written
// once the ring has room and the next record arrives. Forced here on a new kernel.
TEST_F(LiveKernelSymbolsBpf, DropsSeenThroughLostRecordsTriggerOneFullRead) {
  LiveKernelSymbolsOptions options;
  options.ring_pages = 1;
  options.lost_accounting = PerfKsymbolEvents::LostAccounting::kRecordsOnly;
  auto live = LiveKernelSymbols::start(options);
  ASSERT_TRUE(live.ok()) << live.error().message();
  LiveKernelSymbols& l = **live;

  std::vector<LoadedProg> progs;
  for (int i = 0; i < 200; ++i) {
    progs.push_back(load_socket_filter(("sonde_lost_" + std::to_string(i)).c_str()));
    ASSERT_TRUE(progs.back().fd.valid());
  }
  ASSERT_TRUE(l.poll(0).ok());  // drains the full rings; the LOST record is not written yet
  // Each CPU's next record is preceded by its LOST record; a load (and later unload) on the
  // CPUs that dropped produces them.
  LoadedProg probe = load_socket_filter("sonde_lost_x");
  ASSERT_TRUE(probe.fd.valid());
  EXPECT_TRUE(poll_until(l, [&] { return l.full_reads() >= 2; })) << "drop never detected";
  EXPECT_EQ(l.full_reads(), 2u);
  EXPECT_GT(l.lost_events(), 0u);
  for (const auto& p : progs) EXPECT_TRUE(resolves_to(l, p.address, p.symbol)) << p.symbol;
}

}  // namespace
}  // namespace sonde::symbolize
