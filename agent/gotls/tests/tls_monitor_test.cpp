// TlsMonitor against a fake kernel, a fake clock and a fixture /proc, with a real Go crypto/tls
// binary (the symbols fixture): attribution to containers, the fold at exit, the floor, the
// grace period, pid reuse, the discarding of processes never tracked, and the cgroup filter's
// admissions (against a fixture cgroup v2 tree).
#include "agent/gotls/tls_monitor.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <span>

#include "agent/symbols/tests/temp_dir.h"
#include "agent/tests/counting_attachment.h"
#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

using ::sonde::testing::ManualClock;

// The kernel's per-process counts as a table the test writes.
class FakeCounters final : public TlsCounters {
 public:
  bool can_perform_ret() const override { return perform_ret; }
  Result<std::unique_ptr<Attachment>> attach(Program program, const std::string&,
                                             std::span<const UprobeSite> sites) override {
    if (fail_attach_of && *fail_attach_of == program) return Error("attach", EMFILE);
    for (const auto& s : sites) attached.push_back({program, s.file_offset, s.cookie});
    return std::unique_ptr<Attachment>(new testing::CountingAttachment(attachments));
  }
  size_t link_fds(size_t) const override { return 1; }
  void filter_by_cgroup(bool on) override { filtering = on; }
  Status allow_cgroup(uint64_t id) override {
    if (allowed.size() >= max_cgroups) return Error("cgroup map full", E2BIG);
    allowed.insert(id);
    return ok_status();
  }
  void disallow_cgroup(uint64_t id) override { allowed.erase(id); }
  Result<uint64_t> cgroup_of(pid_t pid, uint64_t start_time) const override {
    if (cgroup_error) return *cgroup_error;
    auto it = cgroups.find(pid);
    if (it == cgroups.end() || it->second.first != start_time) return Error("gone", ESRCH);
    return it->second.second;
  }
  std::map<uint32_t, Counts> counts() const override { return table; }
  bool counting(uint32_t tgid) const override { return table.contains(tgid); }
  Counts take(uint32_t tgid) override {
    Counts c = table[tgid];
    table.erase(tgid);
    return c;
  }
  uint64_t full(sonde_gotls_counter) const override { return 0; }

  // `n` GET requests answered 200 by tgid's server side, and `bytes` read.
  void served(uint32_t tgid, uint64_t n, uint64_t bytes) {
    Counts& c = table[tgid];
    c.process.read += bytes;
    sonde_tls_request_key key{};
    key.direction = SONDE_TLS_SERVER;
    key.protocol = SONDE_TLS_HTTP1;
    key.method = 1;  // GET
    key.status_class = 2;
    sonde_tls_request_stats stats{};
    stats.count = n;
    stats.buckets[0] = n;
    c.requests.clear();
    c.requests.emplace_back(key, stats);
  }

  struct Attached {
    Program program;
    uint64_t file_offset;
    uint64_t cookie;
  };
  bool perform_ret = false;
  std::optional<Program> fail_attach_of;
  std::vector<Attached> attached;
  std::map<uint32_t, Counts> table;
  std::atomic<int> attachments = 0;
  bool filtering = false;
  std::set<uint64_t> allowed;
  std::map<pid_t, std::pair<uint64_t, uint64_t>> cgroups;  // pid → (start time, cgroup id)
  std::optional<Error> cgroup_error;                       // what every cgroup_of() answers
  size_t max_cgroups = 4096;
};

constexpr uint64_t kGrace = 60'000'000'000;
const ContainerLabels kApi{"shop", "api-1", "server"};
const TlsMonitor::RequestKey kGet200{"server", "GET", "2xx", "http1", ""};

class TlsMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SONDE_GO_TLS_FIXTURE).empty()) GTEST_SKIP() << "built without Go";
    auto binary = symbols::OpenBinary::open(SONDE_GO_TLS_FIXTURE);
    ASSERT_TRUE(binary.ok()) << binary.error().message();
    binary_ = std::make_unique<symbols::OpenBinary>(std::move(binary).value());
  }

  // A process of the fixture binary, alive in the fixture /proc since `start_time`.
  Candidate process(pid_t pid, uint64_t start_time, bool running = true) {
    return process_of(SONDE_GO_TLS_FIXTURE, "/srv/api", pid, start_time, running);
  }
  Candidate process_of(const std::string& file, const std::string& exe, pid_t pid,
                       uint64_t start_time, bool running = true) {
    set_alive(pid, start_time);
    auto again = symbols::OpenBinary::open(file);
    EXPECT_TRUE(again.ok());
    ProcessInfo info{.pid = pid, .start_time = start_time, .comm = "api", .exe = exe};
    return Candidate{info, std::move(again).value(), running};
  }
  // Another binary: a copy of the fixture (another inode: another file for the kernel too).
  std::string copy_of_fixture(const std::string& name) {
    auto path = copies_.path() / name;
    std::filesystem::copy_file(SONDE_GO_TLS_FIXTURE, path);
    return path.string();
  }
  static std::optional<TlsMonitor::BinaryVerdict> verdict_of(const TlsMonitor& monitor,
                                                             const std::string& exe) {
    for (const auto& v : monitor.verdicts()) {
      if (v.path == exe) return v;
    }
    return std::nullopt;
  }
  void set_alive(pid_t pid, uint64_t start_time) {
    auto dir = proc_dir_.path() / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "stat") << pid << " (api) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                                << start_time << " 0 0\n";
  }
  // Puts the process `c` in the cgroup with id `cgroup`, as the kernel would say.
  void set_cgroup(const Candidate& c, uint64_t cgroup) {
    kernel_.cgroups[c.info.pid] = {c.info.start_time, cgroup};
  }
  void set_gone(pid_t pid) { std::filesystem::remove_all(proc_dir_.path() / std::to_string(pid)); }

  uint64_t requests(const ContainerLabels& labels) {
    auto s = monitor_.snapshot();
    auto it = s.find(labels);
    if (it == s.end()) return UINT64_MAX;  // no series
    auto r = it->second.requests.find(kGet200);
    return r == it->second.requests.end() ? 0 : r->second;
  }

  symbols::testing::TempDir proc_dir_;
  symbols::testing::TempDir copies_;
  ProcReader proc_{proc_dir_.path().string()};
  symbols::ProbeTargetCache cache_{64};
  SharedUprobes uprobes_;
  ::sonde::testing::ManualClock clock_;
  FakeCounters kernel_;
  TlsMonitor monitor_{kernel_, cache_, uprobes_, proc_, kGrace, clock_};
  std::unique_ptr<symbols::OpenBinary> binary_;
};

TEST_F(TlsMonitorTest, AttributesCountsAndFoldsThemAtExit) {
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_GT(kernel_.attachments, 0);
  kernel_.served(100, 3, 300);
  EXPECT_EQ(requests(kApi), 3u);
  EXPECT_EQ(monitor_.snapshot().at(kApi).processes, 1u);
  monitor_.exited(100);
  EXPECT_FALSE(kernel_.counting(100));  // taken from the kernel
  uprobes_.flush();
  EXPECT_EQ(kernel_.attachments, 0);  // its uprobes released
  EXPECT_EQ(requests(kApi), 3u);
  EXPECT_EQ(monitor_.snapshot().at(kApi).read_bytes, 300u);
  EXPECT_EQ(monitor_.snapshot().at(kApi).processes, 0u);
  // A second process of the container adds to what the first left.
  ASSERT_EQ(monitor_.consider(process(101, 9), kApi), TlsMonitor::Outcome::kTracked);
  kernel_.served(101, 2, 10);
  EXPECT_EQ(requests(kApi), 5u);
}

// The ret-performing program (opt-in, and only where the kernel allows register writes) writes
// the registers only while the instruction pointer is the address it was attached with: each
// RET's address at run time, which is its address in the file only in an ET_EXEC binary.
TEST_F(TlsMonitorTest, PerformsRetsOnlyInPositionDependentBinariesAtTheirOwnAddress) {
  auto read_return_sites = [&](TlsCounters::Program program) {
    std::vector<FakeCounters::Attached> out;
    for (const auto& a : kernel_.attached) {
      if (a.program == program) out.push_back(a);
    }
    return out;
  };
  // Off (the default): every RET single-stepped.
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_FALSE(read_return_sites(TlsCounters::Program::kReadReturn).empty());
  EXPECT_TRUE(read_return_sites(TlsCounters::Program::kReadReturnRet).empty());
  EXPECT_EQ(monitor_.verdicts().at(0).return_probe, "single-step");

  auto elf = symbols::ElfFile::parse(binary_->bytes());
  ASSERT_TRUE(elf.ok()) << elf.error().message();
  ASSERT_EQ(elf->type(), ET_EXEC) << "Go's default build is position-dependent";
  {
    FakeCounters kernel;
    kernel.perform_ret = true;
    SharedUprobes uprobes;
    TlsMonitor monitor{kernel, cache_, uprobes, proc_, kGrace, clock_};
    ASSERT_EQ(monitor.consider(process(101, 8), kApi), TlsMonitor::Outcome::kTracked);
    EXPECT_EQ(monitor.verdicts().at(0).return_probe, "bpf-ret");
    kernel_.attached = kernel.attached;
    auto rets = read_return_sites(TlsCounters::Program::kReadReturnRet);
    ASSERT_FALSE(rets.empty());
    EXPECT_TRUE(read_return_sites(TlsCounters::Program::kReadReturn).empty());
    for (const auto& r : rets) {
      // The guard's address is the RET's: the file offset attached is where that address lies,
      // and the byte there is a one-byte `ret`.
      auto offset = elf->file_offset_of(r.cookie);
      ASSERT_TRUE(offset.ok()) << offset.error().message();
      EXPECT_EQ(*offset, r.file_offset);
      EXPECT_EQ(binary_->bytes()[r.file_offset], 0xC3) << std::hex << r.cookie;
    }
    monitor.exited(101);
  }

  // The same binary as ET_DYN (position-independent: loaded anywhere): single-stepped.
  symbols::testing::TempDir dir;
  const auto pie = dir.path() / "api-pie";
  std::filesystem::copy_file(SONDE_GO_TLS_FIXTURE, pie);
  {
    std::fstream f(pie, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offsetof(Elf64_Ehdr, e_type));
    const uint16_t dyn = ET_DYN;
    f.write(reinterpret_cast<const char*>(&dyn), sizeof dyn);
  }
  auto binary = symbols::OpenBinary::open(pie.string());
  ASSERT_TRUE(binary.ok()) << binary.error().message();
  FakeCounters kernel;
  kernel.perform_ret = true;
  SharedUprobes uprobes;
  symbols::ProbeTargetCache cache{64};
  TlsMonitor monitor{kernel, cache, uprobes, proc_, kGrace, clock_};
  set_alive(102, 9);
  ProcessInfo info{.pid = 102, .start_time = 9, .comm = "api", .exe = pie.string()};
  ASSERT_EQ(monitor.consider(Candidate{info, std::move(binary).value(), true}, kApi),
            TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(monitor.verdicts().at(0).return_probe, "single-step");
  kernel_.attached = kernel.attached;
  EXPECT_TRUE(read_return_sites(TlsCounters::Program::kReadReturnRet).empty());
  EXPECT_FALSE(read_return_sites(TlsCounters::Program::kReadReturn).empty());
  monitor.exited(102);
}

TEST_F(TlsMonitorTest, NeverGoesBackwardsWhenTheKernelLosesAProcess) {
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  kernel_.served(100, 4, 0);
  EXPECT_EQ(requests(kApi), 4u);
  kernel_.table.erase(100);  // gone from the kernel's map while the process lives
  EXPECT_EQ(requests(kApi), 4u);
  kernel_.served(100, 6, 0);
  EXPECT_EQ(requests(kApi), 6u);
}

TEST_F(TlsMonitorTest, ForgetsAContainerAGracePeriodAfterItsLastProcess) {
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  kernel_.served(100, 1, 0);
  set_gone(100);
  monitor_.sweep();  // vanished without an exit event
  EXPECT_EQ(monitor_.tracked(), 0u);
  EXPECT_EQ(requests(kApi), 1u);
  clock_.advance_ns(kGrace - 1);
  EXPECT_EQ(requests(kApi), 1u);
  clock_.advance_ns(1);
  EXPECT_EQ(requests(kApi), UINT64_MAX);
}

TEST_F(TlsMonitorTest, PidReuseAndExecStartANewProcessOnTop) {
  Candidate first = process(100, 7);
  ASSERT_EQ(monitor_.consider(first, kApi), TlsMonitor::Outcome::kTracked);
  kernel_.served(100, 2, 0);
  ASSERT_EQ(monitor_.consider(first, kApi), TlsMonitor::Outcome::kTracked);  // unchanged
  EXPECT_EQ(requests(kApi), 2u);
  // Another process under the same pid (its exit was never seen): the first one's counts fold.
  ASSERT_EQ(monitor_.consider(process(100, 8), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(requests(kApi), 2u);
  kernel_.served(100, 1, 0);
  EXPECT_EQ(requests(kApi), 3u);
  // It execs the same binary again.
  ASSERT_EQ(monitor_.consider(process(100, 8, /*running=*/false), kApi),
            TlsMonitor::Outcome::kTracked);
  kernel_.served(100, 1, 0);
  EXPECT_EQ(requests(kApi), 4u);
  EXPECT_EQ(monitor_.tracked(), 1u);
}

TEST_F(TlsMonitorTest, DiscardsCountsOfProcessesNeverTracked) {
  kernel_.served(555, 9, 0);  // an unselected process of an instrumented binary
  monitor_.sweep();
  EXPECT_TRUE(kernel_.counting(555));  // one sweep of grace: consider() may not have run yet
  monitor_.sweep();
  EXPECT_FALSE(kernel_.counting(555));
  EXPECT_EQ(monitor_.discarded_processes(), 1u);
  kernel_.served(556, 1, 0);
  monitor_.exited(556);
  EXPECT_FALSE(kernel_.counting(556));
  EXPECT_EQ(monitor_.discarded_processes(), 2u);
  EXPECT_TRUE(monitor_.snapshot().empty());
}

// limits.maxUprobesPerNode: a policy's uprobes are its binaries' sites, each binary once; a
// process whose binary would take a policy past its limit is not instrumented (nothing is
// attached), and what a policy uses goes down as its processes go.
TEST_F(TlsMonitorTest, APolicysUprobeLimitCountsEachBinaryOnceAndLeavesOutWhatWouldExceedIt) {
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  const size_t sites = kernel_.attached.size();  // the fixture binary's
  ASSERT_GT(sites, 1u);
  const auto limit = static_cast<int64_t>(sites);
  const TlsMonitor::UprobeLimits roomy{{"shop/api", limit}};
  ASSERT_EQ(monitor_.consider(process(101, 8), kApi, roomy), TlsMonitor::Outcome::kTracked);
  ASSERT_EQ(monitor_.consider(process(102, 9), kApi, roomy), TlsMonitor::Outcome::kTracked)
      << "a second process of the binary adds no uprobe";
  EXPECT_EQ(monitor_.policy_uprobes(), (std::map<std::string, size_t>{{"shop/api", sites}}));

  std::string why;
  const TlsMonitor::UprobeLimits tight{{"shop/api", limit},
                                       {"clusterprofilingpolicy/all", limit - 1}};
  EXPECT_EQ(monitor_.consider(process(103, 10), kApi, tight, &why),
            TlsMonitor::Outcome::kOverLimit);
  EXPECT_NE(why.find("policy clusterprofilingpolicy/all allows limits.maxUprobesPerNode (" +
                     std::to_string(limit - 1) + ")"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("/srv/api needs " + std::to_string(sites) + " more"), std::string::npos)
      << why;
  EXPECT_EQ(monitor_.tracked(), 3u);  // 103 is not
  EXPECT_EQ(monitor_.policy_uprobes().count("clusterprofilingpolicy/all"), 0u);

  monitor_.exited(101);
  EXPECT_EQ(monitor_.policy_uprobes().at("shop/api"), sites);  // 102 runs it
  monitor_.exited(102);
  EXPECT_TRUE(monitor_.policy_uprobes().empty());
  EXPECT_EQ(monitor_.consider(process(104, 11), kApi, tight), TlsMonitor::Outcome::kOverLimit)
      << "the tighter policy's limit still holds";
}

// At most Budget::max_binaries binaries are instrumented at once: a process of one more is left
// out whole (nothing of it attached), with a LimitExceeded verdict and a count, and gets in once
// a binary's last process is gone. Processes of an instrumented binary need no slot.
TEST_F(TlsMonitorTest, BoundsTheInstrumentedBinariesAndLeavesTheRestOutWhole) {
  TlsMonitor monitor{kernel_, cache_, uprobes_, proc_, kGrace, clock_, {.max_binaries = 1}};
  const std::string other = copy_of_fixture("other");
  ASSERT_EQ(monitor.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  const size_t sites = kernel_.attached.size();
  std::string why;
  EXPECT_EQ(monitor.consider(process_of(other, "/srv/other", 200, 7), kApi, {}, &why),
            TlsMonitor::Outcome::kOverLimit);
  EXPECT_NE(why.find("--max-go-tls-binaries"), std::string::npos) << why;
  EXPECT_NE(why.find("/srv/other"), std::string::npos) << why;
  EXPECT_EQ(kernel_.attached.size(), sites) << "nothing of /srv/other attached";
  EXPECT_EQ(monitor.not_instrumented(), (std::map<std::string, uint64_t>{{"binary_limit", 1}}));
  auto v = verdict_of(monitor, "/srv/other");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->instrumentable);
  EXPECT_EQ(v->limit_exceeded, why);
  EXPECT_TRUE(verdict_of(monitor, "/srv/api")->limit_exceeded.empty());

  ASSERT_EQ(monitor.consider(process(101, 8), kApi), TlsMonitor::Outcome::kTracked)
      << "a second process of the instrumented binary takes no slot";
  EXPECT_EQ(monitor.instrumented_binaries(), 1u);
  monitor.exited(100);
  EXPECT_EQ(monitor.consider(process_of(other, "/srv/other", 201, 9), kApi),
            TlsMonitor::Outcome::kOverLimit)
      << "pid 101 still runs /srv/api";
  EXPECT_EQ(monitor.not_instrumented().at("binary_limit"), 2u);
  monitor.exited(101);
  EXPECT_EQ(monitor.instrumented_binaries(), 0u);
  ASSERT_EQ(monitor.consider(process_of(other, "/srv/other", 202, 10), kApi),
            TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(kernel_.attached.size(), 2 * sites);
  EXPECT_TRUE(verdict_of(monitor, "/srv/other")->limit_exceeded.empty());
  EXPECT_EQ(monitor.instrumented_binaries(), 1u);
  monitor.exited(202);
}

class FakeDescriptors final : public Descriptors {
 public:
  Result<size_t> open() const override {
    if (error) return Error("count open descriptors", EMFILE);
    return open_now + (links != nullptr ? static_cast<size_t>(links->load()) : 0);
  }
  const std::atomic<int>* links = nullptr;  // FakeCounters' attachments, one descriptor each
  uint64_t soft_limit() const override { return limit; }
  size_t open_now = 0;
  uint64_t limit = 1024;
  bool error = false;
};

// A binary's links must leave kFdReserve descriptors under the soft limit, counted before it is
// attached; one already attached needs none; descriptors that cannot be counted mean none free.
TEST_F(TlsMonitorTest, KeepsTheDescriptorReserve) {
  FakeDescriptors fds;
  TlsMonitor monitor{kernel_, cache_, uprobes_, proc_, kGrace, clock_, {.fds = &fds}};
  const size_t links = 3;  // write, read, read_return: one descriptor each in FakeCounters
  fds.open_now = fds.limit - kFdReserve - links + 1;
  std::string why;
  EXPECT_EQ(monitor.consider(process(100, 7), kApi, {}, &why), TlsMonitor::Outcome::kOverLimit);
  EXPECT_NE(why.find("keeps " + std::to_string(kFdReserve)), std::string::npos) << why;
  EXPECT_TRUE(kernel_.attached.empty());
  EXPECT_EQ(monitor.not_instrumented(), (std::map<std::string, uint64_t>{{"fd_reserve", 1}}));
  EXPECT_FALSE(verdict_of(monitor, "/srv/api")->limit_exceeded.empty());

  fds.open_now = fds.limit - kFdReserve - links;
  ASSERT_EQ(monitor.consider(process(101, 8), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_TRUE(verdict_of(monitor, "/srv/api")->limit_exceeded.empty());
  fds.open_now = fds.limit;  // full, but the binary's links exist already
  EXPECT_EQ(monitor.consider(process(102, 9), kApi), TlsMonitor::Outcome::kTracked);

  fds.error = true;
  EXPECT_EQ(monitor.consider(process_of(copy_of_fixture("other"), "/srv/other", 200, 7), kApi),
            TlsMonitor::Outcome::kOverLimit);
  EXPECT_EQ(monitor.not_instrumented().at("fd_reserve"), 2u);
  monitor.exited(101);
  monitor.exited(102);
}

// When one program cannot be attached, the process is not instrumented and nothing of its
// binary stays attached (no half attach); the next process attaches everything.
TEST_F(TlsMonitorTest, AFailedAttachLeavesNothingAttached) {
  kernel_.fail_attach_of = TlsCounters::Program::kReadReturn;
  EXPECT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kFailed);
  uprobes_.flush();
  EXPECT_EQ(kernel_.attachments, 0);
  EXPECT_EQ(monitor_.tracked(), 0u);
  EXPECT_EQ(monitor_.instrumented_binaries(), 0u);
  kernel_.fail_attach_of.reset();
  ASSERT_EQ(monitor_.consider(process(101, 8), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(kernel_.attachments, 3) << "one attachment per program";
  EXPECT_EQ(monitor_.instrumented_binaries(), 1u);
}

// The filter counts a cgroup while an admitted process of it lives: two processes of one pod
// share its entry, the last one to go removes it, and another pod's cgroup is never allowed.
TEST_F(TlsMonitorTest, TheCgroupFilterCountsACgroupWhileAnAdmittedProcessOfItLives) {
  monitor_.filter_by_cgroup();
  EXPECT_TRUE(kernel_.filtering);
  EXPECT_TRUE(monitor_.filtering_by_cgroup());
  Candidate a1 = process(100, 7);
  Candidate a2 = process(101, 8);
  Candidate b = process(200, 9);
  const uint64_t pod_a = 5001, pod_b = 5002;
  set_cgroup(a1, pod_a);
  set_cgroup(a2, pod_a);
  set_cgroup(b, pod_b);
  monitor_.admit(a1.info, kApi);
  monitor_.admit(a2.info, kApi);
  monitor_.admit(a1.info, kApi);  // again (a re-selection): still one admission
  EXPECT_EQ(kernel_.allowed, std::set<uint64_t>{pod_a});
  ASSERT_EQ(monitor_.consider(a1, kApi), TlsMonitor::Outcome::kTracked);
  monitor_.exited(100);
  EXPECT_EQ(kernel_.allowed, std::set<uint64_t>{pod_a});  // 101 still lives in it
  set_gone(101);
  monitor_.sweep();  // 101 vanished without an exit event
  EXPECT_TRUE(kernel_.allowed.empty());
  EXPECT_FALSE(kernel_.allowed.contains(pod_b));
  EXPECT_TRUE(monitor_.filtering_by_cgroup());
}

// A process the kernel no longer has (or a later one under its pid: another start time) is
// not admitted; a kernel that cannot name cgroups turns the filter off rather than leave a
// selected process silently never counted.
TEST_F(TlsMonitorTest, AGoneProcessIsNotAdmittedAndAKernelThatCannotSayTurnsTheFilterOff) {
  monitor_.filter_by_cgroup();
  Candidate a = process(100, 7);
  monitor_.admit(a.info, kApi);  // the kernel has no such process: gone, nothing changes
  EXPECT_TRUE(monitor_.filtering_by_cgroup());
  kernel_.cgroups[100] = {6, 5001};  // pid 100, but an earlier process
  monitor_.admit(a.info, kApi);
  EXPECT_TRUE(kernel_.allowed.empty());
  set_cgroup(a, 5001);
  monitor_.admit(a.info, kApi);
  ASSERT_EQ(kernel_.allowed, std::set<uint64_t>{5001});
  kernel_.cgroup_error = Error("open a task iterator: Invalid argument", EINVAL);
  monitor_.admit(process(101, 8).info, kApi);
  EXPECT_FALSE(monitor_.filtering_by_cgroup());
  EXPECT_FALSE(kernel_.filtering);
  EXPECT_TRUE(kernel_.allowed.empty());
}

TEST_F(TlsMonitorTest, AFullCgroupMapTurnsTheFilterOff) {
  monitor_.filter_by_cgroup();
  kernel_.max_cgroups = 1;
  Candidate a = process(100, 7);
  Candidate b = process(200, 9);
  set_cgroup(a, 5001);
  set_cgroup(b, 5002);
  monitor_.admit(a.info, kApi);
  EXPECT_TRUE(kernel_.filtering);
  monitor_.admit(b.info, kApi);
  EXPECT_FALSE(kernel_.filtering);
  EXPECT_FALSE(monitor_.filtering_by_cgroup());
}

// A selected process that exits before consider() gets to it (a CLI tool's run is shorter
// than an inspection) counts for the container it was selected with, from the kernel's counts
// (its binary's probes are there for another process); one never selected is discarded. A
// selected process the worker has not reached yet keeps its counts across sweeps.
TEST_F(TlsMonitorTest, AProcessThatExitsBeforeItIsSeenCountsForTheContainerItWasSelectedWith) {
  ASSERT_EQ(monitor_.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  kernel_.served(100, 1, 10);
  monitor_.admit(process(101, 8).info, kApi);
  kernel_.served(101, 2, 20);
  monitor_.exited(101);
  EXPECT_EQ(requests(kApi), 3u);
  EXPECT_EQ(monitor_.exited_unseen(), 1u);
  EXPECT_EQ(monitor_.discarded_processes(), 0u);

  kernel_.served(102, 5, 50);  // never selected
  monitor_.exited(102);
  EXPECT_EQ(requests(kApi), 3u);
  EXPECT_EQ(monitor_.discarded_processes(), 1u);

  // Selected, alive, not considered yet: its counts wait for consider() however many sweeps pass.
  monitor_.admit(process(103, 9).info, kApi);
  kernel_.served(103, 4, 40);
  monitor_.sweep();
  monitor_.sweep();
  monitor_.sweep();
  EXPECT_TRUE(kernel_.counting(103));
  ASSERT_EQ(monitor_.consider(process(103, 9), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(requests(kApi), 7u);

  // Gone without an exit event: the sweep attributes it.
  monitor_.admit(process(104, 10).info, kApi);
  kernel_.served(104, 6, 60);
  set_gone(104);
  monitor_.sweep();
  EXPECT_EQ(requests(kApi), 13u);
  EXPECT_EQ(monitor_.exited_unseen(), 2u);
  monitor_.exited(100);
  monitor_.exited(103);
}

// sonde_agent_gotls_attach_delay_seconds: exec (the event's time) → probes attached, only for a
// process whose binary was attached for it.
TEST_F(TlsMonitorTest, AttachDelayIsObservedOnlyForProcessesWhoseBinaryWasAttachedForThem) {
  Candidate first = process(100, 7, /*running=*/false);
  first.info.exec_ns = clock_.now_ns() - 4'000'000;  // 4 ms before the attach
  ASSERT_EQ(monitor_.consider(first, kApi), TlsMonitor::Outcome::kTracked);
  Candidate second = process(101, 8, /*running=*/false);  // attached already
  second.info.exec_ns = clock_.now_ns() - 1'000'000;
  ASSERT_EQ(monitor_.consider(second, kApi), TlsMonitor::Outcome::kTracked);
  // A new binary found by a /proc scan (no exec seen): nothing to measure from.
  ASSERT_EQ(monitor_.consider(process_of(copy_of_fixture("scanned"), "/srv/scanned", 200, 7), kApi),
            TlsMonitor::Outcome::kTracked);
  const auto d = monitor_.attach_delays();
  EXPECT_EQ(d.count, 1u);
  EXPECT_DOUBLE_EQ(d.sum_seconds, 0.004);
  EXPECT_EQ(d.counts[2], 1u) << "(2.5 ms, 5 ms]";
  // A new binary at its exec: observed.
  Candidate other = process_of(copy_of_fixture("other"), "/srv/other", 300, 9, /*running=*/false);
  other.info.exec_ns = clock_.now_ns() - 30'000'000;
  ASSERT_EQ(monitor_.consider(other, kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(monitor_.attach_delays().count, 2u);
  EXPECT_EQ(monitor_.attach_delays().counts[7], 1u) << "(25 ms, 50 ms]";
}

// With a linger, a binary keeps its uprobes after its last process exits: its next process is
// counted without a new attach. Kept binaries count against the node's bounds and give way to a
// new binary, the one idle the longest first; the linger expires at a sweep.
TEST_F(TlsMonitorTest, KeepsABinarysProbesAfterItsLastExitAndEvictsTheOldestForANewOne) {
  constexpr uint64_t kLinger = 600'000'000'000;
  SharedUprobes uprobes{kLinger, clock_};
  FakeDescriptors fds;
  fds.links = &kernel_.attachments;
  TlsMonitor monitor{
      kernel_, cache_, uprobes, proc_, kGrace, clock_, {.max_binaries = 2, .fds = &fds}};
  const std::string second = copy_of_fixture("second");
  const std::string third = copy_of_fixture("third");
  ASSERT_EQ(monitor.consider(process(100, 7), kApi), TlsMonitor::Outcome::kTracked);
  const size_t sites = kernel_.attached.size();
  const int links = kernel_.attachments;
  monitor.exited(100);
  uprobes.flush();
  EXPECT_EQ(kernel_.attachments, links) << "detached at the last exit";
  EXPECT_EQ(monitor.idle_binaries(), 1u);
  ASSERT_EQ(monitor.consider(process(101, 8), kApi), TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(kernel_.attached.size(), sites) << "the next run attached again";
  EXPECT_EQ(monitor.idle_binaries(), 0u);
  monitor.exited(101);

  clock_.advance_ns(1'000'000'000);
  ASSERT_EQ(monitor.consider(process_of(second, "/srv/second", 200, 7), kApi),
            TlsMonitor::Outcome::kTracked)
      << "one instrumented or kept binary, one slot left";
  monitor.exited(200);
  EXPECT_EQ(monitor.idle_binaries(), 2u);
  EXPECT_EQ(kernel_.attachments, 2 * links);

  // A third binary: the bound (2) is reached by kept ones; the oldest (/srv/api) gives way.
  ASSERT_EQ(monitor.consider(process_of(third, "/srv/third", 300, 7), kApi),
            TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(monitor.evicted_binaries(), 1u);
  EXPECT_EQ(kernel_.attachments, 2 * links) << "/srv/api detached before /srv/third attached";
  EXPECT_EQ(monitor.idle_binaries(), 1u);
  ASSERT_EQ(monitor.consider(process_of(second, "/srv/second", 201, 8), kApi),
            TlsMonitor::Outcome::kTracked);
  EXPECT_EQ(kernel_.attached.size(), 3 * sites) << "/srv/second was still attached";

  // Descriptors: kept binaries give way too. Room for one more binary's links, none for two.
  monitor.exited(201);
  EXPECT_EQ(monitor.idle_binaries(), 1u);
  fds.open_now = fds.limit - kFdReserve - 3 * static_cast<size_t>(links) + 1;
  TlsMonitor::Budget roomy{.max_binaries = 10, .fds = &fds};
  TlsMonitor wide{kernel_, cache_, uprobes, proc_, kGrace, clock_, roomy};
  ASSERT_EQ(wide.consider(process(102, 9), kApi), TlsMonitor::Outcome::kTracked)
      << "/srv/api attached anew: /srv/second (kept) gave its descriptors";
  EXPECT_EQ(wide.evicted_binaries(), 1u);
  wide.exited(102);
  monitor.exited(300);

  // The linger expires at a sweep.
  clock_.advance_ns(kLinger);
  monitor.sweep();
  uprobes.flush();
  EXPECT_EQ(kernel_.attachments, 0);
  EXPECT_EQ(monitor.idle_binaries(), 0u);
}

// A container over its overhead budget is stopped (GoTlsFeature): its processes are untracked
// with their counts folded into its series, and a binary only it runs is detached at once
// despite the linger, while a binary another container runs keeps its probes for that one.
TEST_F(TlsMonitorTest, StoppingAContainerDetachesWhatOnlyItRunsAtOnce) {
  constexpr uint64_t kLinger = 600'000'000'000;
  SharedUprobes uprobes{kLinger, clock_};
  TlsMonitor monitor{kernel_, cache_, uprobes, proc_, kGrace, clock_};
  const ContainerLabels chatty{"shop", "chatty", "app"};
  const ContainerLabels quiet{"shop", "quiet", "app"};
  const std::string second = copy_of_fixture("second");
  ASSERT_EQ(monitor.consider(process(100, 7), chatty), TlsMonitor::Outcome::kTracked);
  const int per_binary = kernel_.attachments;
  ASSERT_EQ(monitor.consider(process(101, 7), quiet), TlsMonitor::Outcome::kTracked);
  ASSERT_EQ(monitor.consider(process_of(second, "/srv/second", 200, 7), chatty),
            TlsMonitor::Outcome::kTracked);
  ASSERT_EQ(kernel_.attachments, 2 * per_binary);
  kernel_.served(100, 3, 300);
  kernel_.served(200, 2, 200);
  EXPECT_EQ(monitor.a_process_per_container(),
            (std::map<ContainerLabels, pid_t>{{chatty, 100}, {quiet, 101}}));

  EXPECT_EQ(monitor.stop_container(chatty), (std::vector<pid_t>{100, 200}));
  uprobes.flush();
  EXPECT_EQ(kernel_.attachments, per_binary)
      << "/srv/second detached at once, /srv/api kept for quiet";
  EXPECT_EQ(monitor.idle_binaries(), 0u) << "nothing kept for the linger";
  EXPECT_EQ(monitor.tracked(), 1u);
  EXPECT_EQ(monitor.a_process_per_container(), (std::map<ContainerLabels, pid_t>{{quiet, 101}}));
  auto snap = monitor.snapshot();
  ASSERT_TRUE(snap.contains(chatty)) << "its series stay for the grace period";
  EXPECT_EQ(snap[chatty].processes, 0u);
  EXPECT_EQ(snap[chatty].read_bytes, 500u) << "its counts folded";
  EXPECT_FALSE(kernel_.counting(100));
  EXPECT_TRUE(monitor.stop_container(chatty).empty());
}

// Release pipelines strip .go.buildinfo; the function table stays. Such a binary is
// instrumented, its verdict saying where the version came from.
TEST_F(TlsMonitorTest, AGoBinaryWithoutBuildInfoIsInstrumentedFromItsFunctionTable) {
  const std::string copy = (copies_.path() / "no-buildinfo").string();
  const std::string objcopy = "objcopy --rename-section .go.buildinfo=.go.renamed " +
                              std::string(SONDE_GO_TLS_FIXTURE) + " " + copy;
  ASSERT_EQ(std::system(objcopy.c_str()), 0) << objcopy;
  auto elf_bytes = symbols::OpenBinary::open(copy);
  ASSERT_TRUE(elf_bytes.ok());
  auto elf = symbols::ElfFile::parse(elf_bytes->bytes());
  ASSERT_TRUE(elf.ok());
  ASSERT_FALSE(elf->find_section(".go.buildinfo")) << "objcopy left the section";

  ASSERT_EQ(monitor_.consider(process_of(copy, "/srv/nobuildinfo", 100, 7), kApi),
            TlsMonitor::Outcome::kTracked);
  auto v = verdict_of(monitor_, "/srv/nobuildinfo");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->instrumentable);
  // The fixture is built by Debian's Go (1.19): the 1.18 table layout.
  EXPECT_EQ(v->reason, "go1.18-1.19 (from .gopclntab; no .go.buildinfo)");
  kernel_.served(100, 2, 20);
  EXPECT_EQ(requests(kApi), 2u);
  monitor_.exited(100);
}

// A stripped Go binary is recognized by its function table, whatever its build-id notes say: a
// cgo build linked by the system linker carries a GNU build id (which the identity prefers), and
// a stripping pipeline may drop Go's note.
TEST_F(TlsMonitorTest, AStrippedGoBinaryWithoutGosBuildIdNoteIsStillInstrumented) {
  const std::string copy = (copies_.path() / "stripped-no-go-note").string();
  const std::string objcopy = "objcopy --strip-all --remove-section .note.go.buildid " +
                              std::string(SONDE_GO_TLS_FIXTURE) + " " + copy;
  ASSERT_EQ(std::system(objcopy.c_str()), 0) << objcopy;
  auto binary = symbols::OpenBinary::open(copy);
  ASSERT_TRUE(binary.ok());
  ASSERT_NE(binary->identity().digest_kind, symbols::BinaryIdentity::DigestKind::kGoBuildId);

  // A C program (no Go function table, no crypto/tls symbols) is not a candidate: no verdict.
  ASSERT_EQ(monitor_.consider(process_of("/bin/true", "/bin/true", 99, 6), kApi),
            TlsMonitor::Outcome::kNotTlsUser);
  EXPECT_FALSE(verdict_of(monitor_, "/bin/true"));

  ASSERT_EQ(monitor_.consider(process_of(copy, "/srv/stripped", 100, 7), kApi),
            TlsMonitor::Outcome::kTracked);
  auto v = verdict_of(monitor_, "/srv/stripped");
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->instrumentable);
  EXPECT_TRUE(v->stripped);
  monitor_.exited(100);
}

}  // namespace
}  // namespace sonde::agent
