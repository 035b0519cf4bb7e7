#include "agent/doctor/doctor.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/tests/child_process.h"

namespace sonde::agent {
namespace {

namespace fs = std::filesystem;
using Verdict = Check::Verdict;

TEST(Doctor, ParsesKernelVersions) {
  EXPECT_EQ(parse_kernel_version("6.18.44-fc-v595\n"), (KernelVersion{6, 18, 44}));
  EXPECT_EQ(parse_kernel_version("5.10.0-28-amd64"), (KernelVersion{5, 10, 0}));
  EXPECT_EQ(parse_kernel_version("6.1"), (KernelVersion{6, 1, 0}));
  EXPECT_EQ(parse_kernel_version("linux"), std::nullopt);
  EXPECT_EQ(parse_kernel_version("6"), std::nullopt);
}

TEST(Doctor, ParsesEffectiveCapabilities) {
  EXPECT_EQ(parse_effective_caps("Name:\tx\nCapInh:\t0\nCapEff:\t000001ffffffffff\n"),
            0x1ffffffffffull);
  EXPECT_EQ(parse_effective_caps("Name:\tx\nCapPrm:\t1\n"), std::nullopt);
  EXPECT_EQ(parse_effective_caps("Name:\tx\nCapEff:\tzz\n"), std::nullopt);
}

const Check* find(const std::vector<Check>& checks, const std::string& name) {
  for (const auto& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

class FakeRoots : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sonde-doctor-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  DoctorOptions options() const {
    return {.proc_root = (root_ / "proc").string(),
            .sys_root = (root_ / "sys").string(),
            .probe_kernel = false};
  }
  fs::path root_;
};

TEST_F(FakeRoots, EmptyRootsFailAndSayWhatToDo) {
  auto checks = run_doctor(options());
  EXPECT_FALSE(all_passed(checks));
  for (const char* name : {"kernel version", "kernel BTF", "capabilities", "uprobe PMU"}) {
    const Check* c = find(checks, name);
    ASSERT_NE(c, nullptr) << name;
    EXPECT_EQ(c->verdict, Verdict::kFail) << name;
    EXPECT_FALSE(c->fix.empty()) << name;
  }
  auto json = to_json(checks);
  EXPECT_EQ(json["ok"], false);
  EXPECT_NE(render_table(checks).find("FAIL"), std::string::npos);
}

TEST_F(FakeRoots, HealthyNodePasses) {
  uint64_t caps = (1ull << CAP_BPF) | (1ull << CAP_PERFMON) | (1ull << CAP_SYS_PTRACE) |
                  (1ull << CAP_DAC_READ_SEARCH);
  char hex[32];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(caps));
  write("proc/sys/kernel/osrelease", "6.1.0-13-amd64\n");
  write("proc/self/status", std::string("Name:\tsonde\nCapEff:\t") + hex + "\n");
  write("proc/self/mounts",
        "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n");
  write("sys/kernel/btf/vmlinux", "BTF");
  write("sys/bus/event_source/devices/uprobe/type", "7\n");
  write("sys/bus/event_source/devices/kprobe/type", "6\n");
  auto checks = run_doctor(options());
  EXPECT_TRUE(all_passed(checks)) << render_table(checks);
  EXPECT_EQ(find(checks, "CAP_SYS_RESOURCE")->verdict, Verdict::kWarn);
  EXPECT_EQ(find(checks, "cgroup version")->detail, "v2 (unified) at /sys/fs/cgroup");
}

TEST_F(FakeRoots, MissingCapabilityIsNamed) {
  write("proc/self/status", "Name:\tsonde\nCapEff:\t0000000000000000\n");
  auto checks = run_doctor(options());
  const Check* bpf = find(checks, "CAP_BPF");
  ASSERT_NE(bpf, nullptr);
  EXPECT_EQ(bpf->verdict, Verdict::kFail);
  EXPECT_NE(bpf->fix.find("grant CAP_BPF"), std::string::npos);
}

TEST_F(FakeRoots, NonRootIsToldCapabilitiesNeedUidZero) {
  write("proc/self/status", "Name:\tsonde\nUid:\t65532\t65532\t65532\t65532\nCapEff:\t0\n");
  auto checks = run_doctor(options());
  const Check* perfmon = find(checks, "CAP_PERFMON");
  ASSERT_NE(perfmon, nullptr);
  EXPECT_NE(perfmon->fix.find("--cap-add PERFMON"), std::string::npos) << perfmon->fix;
  EXPECT_NE(perfmon->fix.find("uid 0"), std::string::npos) << perfmon->fix;
}

TEST_F(FakeRoots, DacOverrideCoversDacReadSearch) {
  char status[64];
  snprintf(status, sizeof status, "Name:\tsonde\nCapEff:\t%016llx\n", 1ull << CAP_DAC_OVERRIDE);
  write("proc/self/status", status);
  auto checks = run_doctor(options());
  EXPECT_EQ(find(checks, "CAP_DAC_READ_SEARCH")->verdict, Verdict::kPass);
  EXPECT_EQ(find(checks, "CAP_SYS_PTRACE")->verdict, Verdict::kFail);
}

TEST(Doctor, PermissionRefusalIsNotAMissingKernelFeature) {
  Check c = bpf_refusal_check("BPF program: kprobe/uprobe", EPERM, 1ull << CAP_BPF, true);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.detail.find("missing permission"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("lacks CAP_PERFMON"), std::string::npos) << c.detail;
  EXPECT_EQ(c.detail.find("CAP_BPF"), std::string::npos) << c.detail;
  EXPECT_EQ(c.fix.find("upgrade"), std::string::npos) << c.fix;

  // Maps need CAP_BPF only.
  c = bpf_refusal_check("BPF map: ringbuf", EPERM, 1ull << CAP_PERFMON, false);
  EXPECT_NE(c.detail.find("lacks CAP_BPF"), std::string::npos) << c.detail;

  // Refused with the capabilities held: not the capabilities, something in front of bpf(2).
  c = bpf_refusal_check("BPF program: tracepoint", EACCES,
                        (1ull << CAP_BPF) | (1ull << CAP_PERFMON), true);
  EXPECT_NE(c.detail.find("missing permission"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("seccomp"), std::string::npos) << c.fix;

  c = bpf_refusal_check("BPF map: ringbuf", EINVAL, 1ull << CAP_BPF, false);
  EXPECT_NE(c.detail.find("not supported by this kernel"), std::string::npos) << c.detail;
  EXPECT_NE(c.fix.find("upgrade the kernel"), std::string::npos) << c.fix;
}

TEST(Doctor, StartMessageNamesEachMissingCapability) {
  uint64_t all = (1ull << CAP_BPF) | (1ull << CAP_PERFMON) | (1ull << CAP_SYS_PTRACE) |
                 (1ull << CAP_DAC_READ_SEARCH);
  EXPECT_EQ(missing_capabilities_message(all, 0), "");
  // Before 5.8 CAP_SYS_ADMIN held what CAP_BPF and CAP_PERFMON hold now.
  EXPECT_EQ(missing_capabilities_message(
                (1ull << CAP_SYS_ADMIN) | (1ull << CAP_SYS_PTRACE) | (1ull << CAP_DAC_OVERRIDE), 0),
            "");

  std::string m = missing_capabilities_message(1ull << CAP_BPF, 0);
  EXPECT_NE(m.find("--cap-add PERFMON --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("--cap-add BPF"), std::string::npos) << m;
  EXPECT_NE(m.find("capabilities.add: [PERFMON, SYS_PTRACE, DAC_READ_SEARCH]"), std::string::npos)
      << m;
  EXPECT_EQ(m.find("uid"), std::string::npos) << m;
  EXPECT_NE(missing_capabilities_message(0, 65532).find("runs as uid 65532"), std::string::npos);
}

// The running node binaries, each with whether its JavaScript frames can be named: Debian's node
// 20 publishes a layout the profiler uses; with no node running the check passes and says so.
TEST(Doctor, SaysWhetherRunningNodeBinariesGetTheirJavaScriptFramesNamed) {
  auto check = [] {
    for (const auto& c : run_doctor({.probe_kernel = false})) {
      if (c.name == "javascript frames") return c;
    }
    return Check{};
  };
  testing::ChildProcess node(
      {"/usr/bin/node", "-e", "console.log('ready'); setInterval(() => {}, 1000)"});
  ASSERT_TRUE(node.wait_for_line("ready", std::chrono::seconds(20)));
  // Other node binaries running beside the test may add entries (and a warning) of their own.
  const Check running = check();
  EXPECT_NE(running.detail.find("/usr/bin/node: supported"), std::string::npos) << running.detail;

  const fs::path empty =
      fs::temp_directory_path() / ("sonde-doctor-js-" + std::to_string(getpid()));
  fs::create_directories(empty);
  Check none;
  for (const auto& c : run_doctor({.proc_root = empty.string(), .probe_kernel = false})) {
    if (c.name == "javascript frames") none = c;
  }
  fs::remove_all(empty);
  EXPECT_EQ(none.verdict, Verdict::kPass);
  EXPECT_NE(none.detail.find("no node process"), std::string::npos) << none.detail;
}

TEST_F(FakeRoots, OldKernelFails) {
  write("proc/sys/kernel/osrelease", "4.19.0\n");
  auto checks = run_doctor(options());
  EXPECT_EQ(find(checks, "kernel version")->verdict, Verdict::kFail);
}

}  // namespace
}  // namespace sonde::agent
