// Needs root and the real kernel (ctest label: bpf).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "agent/discovery/candidate.h"
#include "agent/discovery/proc_reader.h"
#include "agent/kernel/process_cgroups.h"
#include "agent/procevents/process_events.h"
#include "agent/tests/cgroup2_root.h"
#include "agent/tests/child_process.h"

namespace sonde::agent {
namespace {

TEST(ProcessEventsBpf, SeesExecAndExitOfAChild) {
  std::vector<ProcessEvent> events;
  auto source = ProcessEventSource::start([&](const ProcessEvent& e) { events.push_back(e); });
  ASSERT_TRUE(source.ok()) << source.error().message();

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "exit 3", nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 3);

  std::optional<ProcessEvent> exec, exit;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!exec || !exit) && std::chrono::steady_clock::now() < deadline) {
    auto n = (*source)->poll(100);
    ASSERT_TRUE(n.ok()) << n.error().message();
    for (const auto& e : events) {
      if (e.pid != static_cast<uint32_t>(child)) continue;
      if (e.kind == ProcessEvent::Kind::kExec) exec = e;
      if (e.kind == ProcessEvent::Kind::kExit) exit = e;
    }
  }
  ASSERT_TRUE(exec.has_value()) << "no exec event for pid " << child;
  ASSERT_TRUE(exit.has_value()) << "no exit event for pid " << child;
  EXPECT_EQ(exec->filename, "/bin/sh");
  EXPECT_EQ(exec->comm, "sh");
  EXPECT_EQ(exec->ppid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(exit->comm, "sh");
  EXPECT_EQ(exit->exit_code, static_cast<uint32_t>(status));
  EXPECT_LE(exec->timestamp_ns, exit->timestamp_ns);
  EXPECT_EQ((*source)->dropped(), 0u);
}

// The exec event's cgroup id (bpf_get_current_cgroup_id() in the process) is the inode of the
// process's cgroup directory. The child runs in a cgroup of its own, not the test's.
TEST(ProcessEventsBpf, TheExecsCgroupIdIsItsCgroupDirectorysInode) {
  const std::string root = sonde::testing::cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string dir = root + "/sonde-procevents-test-" + std::to_string(getpid());
  ASSERT_TRUE(std::filesystem::create_directory(dir)) << dir;
  struct Cleanup {
    std::string dir;
    ~Cleanup() { rmdir(dir.c_str()); }
  } cleanup{dir};

  std::vector<ProcessEvent> events;
  auto source = ProcessEventSource::start([&](const ProcessEvent& e) { events.push_back(e); });
  ASSERT_TRUE(source.ok()) << source.error().message();
  pid_t pid = 0;
  {
    // The shell moves itself into the cgroup, then execs sleep there.
    sonde::testing::ChildProcess child(
        {"/bin/sh", "-c",
         "echo $$ > '" + dir + "/cgroup.procs' && echo in && exec /bin/sleep 1000"});
    pid = child.pid();
    ASSERT_TRUE(child.wait_for_line("in", std::chrono::seconds(10)));
    // Until it runs sleep: it must not be killed before its exec.
    (void)sonde::testing::wait_for_exe(pid, "/sleep", std::chrono::seconds(10));
  }  // killed and reaped: the cgroup can go
  std::optional<ProcessEvent> exec;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!exec && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE((*source)->poll(100).ok());
    for (const auto& e : events) {
      if (e.pid == static_cast<uint32_t>(pid) && e.kind == ProcessEvent::Kind::kExec &&
          e.filename == "/bin/sleep") {
        exec = e;
      }
    }
  }
  if (!exec) {
    // What the source did see names the cause next time: a drop, or an event under other names.
    std::ostringstream seen;
    for (const auto& e : events) {
      if (e.pid != static_cast<uint32_t>(pid)) continue;
      seen << "\n  " << (e.kind == ProcessEvent::Kind::kExec ? "exec " : "exit ") << e.filename
           << " comm=" << e.comm << " cgroup=" << e.cgroup_id;
    }
    FAIL() << "no exec of /bin/sleep for pid " << pid << "; " << events.size() << " events in all, "
           << (*source)->dropped() << " dropped; this pid's:" << seen.str();
  }
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(exec->cgroup_id, st.st_ino);
}

// ProcessCgroups names a process's cgroup as the kernel's filters see it, also to a reader in a
// private cgroup namespace (an agent in a pod), to which /proc shows the cgroup as "/../...":
// a forked child of the test moves into a cgroup of its own, unshares its cgroup namespace and
// asks there. A later process under the pid (another start time) is not taken for it.
TEST(ProcessCgroupsBpf, NamesTheCgroupFromAPrivateCgroupNamespace) {
  const std::string root = sonde::testing::cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  const std::string base = root + "/sonde-process-cgroups-test-" + std::to_string(getpid());
  const std::string member_dir = base + "/member", reader_dir = base + "/reader";
  ASSERT_TRUE(std::filesystem::create_directories(member_dir));
  ASSERT_TRUE(std::filesystem::create_directories(reader_dir));
  struct Cleanup {
    std::vector<std::string> dirs;
    ~Cleanup() {
      for (const auto& d : dirs) rmdir(d.c_str());
    }
  } cleanup{{member_dir, reader_dir, base}};
  auto cgroups = ProcessCgroups::load();
  ASSERT_TRUE(cgroups.ok()) << cgroups.error().message();
  struct stat st {};
  ASSERT_EQ(stat(member_dir.c_str(), &st), 0);

  sonde::testing::ChildProcess member(
      {"/bin/sh", "-c",
       "echo $$ > '" + member_dir + "/cgroup.procs' && echo in && exec sleep 1000"});
  ASSERT_TRUE(member.wait_for_line("in", std::chrono::seconds(10)));
  auto info = ProcReader().read(member.pid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  auto here = (*cgroups)->cgroup_of(member.pid(), info->start_time);
  ASSERT_TRUE(here.ok()) << here.error().message();
  EXPECT_EQ(*here, st.st_ino);
  auto later = (*cgroups)->cgroup_of(member.pid(), info->start_time + 1);
  ASSERT_FALSE(later.ok());
  EXPECT_TRUE(is_gone(later.error())) << later.error().message();

  // The reader: exit 0 when it saw "/.." in /proc and the kernel's id; the failing step else.
  pid_t reader = fork();
  ASSERT_GE(reader, 0);
  if (reader == 0) {
    if (!(std::ofstream(reader_dir + "/cgroup.procs") << getpid()).flush()) _exit(1);
    if (unshare(CLONE_NEWCGROUP) != 0) _exit(2);
    std::stringstream text;
    text << std::ifstream("/proc/" + std::to_string(member.pid()) + "/cgroup").rdbuf();
    if (text.str().find("0::/../member") == std::string::npos) _exit(3);
    auto id = (*cgroups)->cgroup_of(member.pid(), info->start_time);
    _exit(id.ok() && *id == st.st_ino ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(reader, &status, 0), reader);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: cannot join the reader cgroup, 2: unshare, 3: /proc does not read /../member, "
         "4: the kernel's id differs from the cgroup directory's inode";
}

}  // namespace
}  // namespace sonde::agent
