#include "agent/discovery/proc_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/tests/cgroup2_root.h"

namespace sonde::agent {
namespace {

constexpr const char* kId = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

TEST(ContainerId, RuntimesAndCgroupVersions) {
  std::string id = kId;
  // containerd + systemd driver, cgroup v2
  EXPECT_EQ(container_id_from_cgroup("0::/kubepods.slice/kubepods-burstable.slice/"
                                     "kubepods-burstable-pod1234.slice/cri-containerd-" +
                                     id + ".scope\n"),
            id);
  // CRI-O
  EXPECT_EQ(
      container_id_from_cgroup("0::/kubepods.slice/kubepods-pod1.slice/crio-" + id + ".scope\n"),
      id);
  // Docker, systemd driver
  EXPECT_EQ(container_id_from_cgroup("0::/system.slice/docker-" + id + ".scope\n"), id);
  // cgroupfs driver, cgroup v1 (containerd or docker)
  EXPECT_EQ(container_id_from_cgroup("12:pids:/kubepods/besteffort/pod5f2e/" + id +
                                     "\n11:memory:/kubepods/besteffort/pod5f2e/" + id + "\n"),
            id);
  EXPECT_EQ(container_id_from_cgroup("4:cpu:/docker/" + id + "\n"), id);
  // Podman
  EXPECT_EQ(container_id_from_cgroup("0::/machine.slice/libpod-" + id + ".scope/container\n"), id);
}

TEST(ContainerId, HostProcessesHaveNone) {
  EXPECT_EQ(container_id_from_cgroup("0::/user.slice/user-0.slice/session-1.scope\n"), "");
  EXPECT_EQ(container_id_from_cgroup("0::/\n"), "");
  EXPECT_EQ(container_id_from_cgroup(""), "");
  EXPECT_EQ(container_id_from_cgroup("garbage"), "");
  // 63 hex digits is not an id
  EXPECT_EQ(container_id_from_cgroup("0::/docker/" + std::string(kId).substr(1) + "\n"), "");
}

TEST(CgroupParsing, TheV2Mount) {
  EXPECT_EQ(cgroup2_mount("proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"),
            "/sys/fs/cgroup");
  EXPECT_EQ(cgroup2_mount("cgroup /sys/fs/cgroup/pids cgroup rw 0 0\n"
                          "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"),
            "/sys/fs/cgroup/unified");
  EXPECT_EQ(cgroup2_mount("cgroup /sys/fs/cgroup/pids cgroup rw 0 0\n"), std::nullopt);
  EXPECT_EQ(cgroup2_mount("garbage\n\n  \n"), std::nullopt);
}

TEST(StatParsing, CommWithSpacesAndParens) {
  std::string stat =
      "42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
      "987654 1000 10";
  EXPECT_EQ(parse_stat_start_time(stat), 987654u);
  EXPECT_EQ(parse_stat_start_time("42 (x) S 1"), std::nullopt);
  EXPECT_EQ(parse_stat_start_time("no paren"), std::nullopt);
}

TEST(SyscallParsing, BlockedRunningAndMalformed) {
  auto epoll = parse_syscall("232 0x7 0x7ffd4a3c1e30 0x400 0xffffffff 0x0 0x8 0x7ffd 0x7f12\n");
  EXPECT_EQ(epoll.nr, 232);
  EXPECT_EQ(epoll.arg0, 7u);
  EXPECT_EQ(parse_syscall("running\n").nr, -1);
  EXPECT_EQ(parse_syscall("-1 0x7ffd4a3c1dd8 0x7f1234567890\n").nr, -1);
  // Malformed text reads as "not in a system call", never as syscall 0 (read).
  EXPECT_EQ(parse_syscall("").nr, -1);
  EXPECT_EQ(parse_syscall("garbage").nr, -1);
  EXPECT_EQ(parse_syscall("7 zz").nr, -1);
  EXPECT_EQ(parse_syscall("7 0x1ffffffffffffffff").nr, -1);
}

TEST(MapsParsing, FirstMappingOfExactlyTheExecutable) {
  const std::string maps =
      "55d0c0a00000-55d0c0a20000 r--p 00000000 08:01 131 /usr/bin/node-helper\n"
      "55d0c1a00000-55d0c1a20000 r--p 00000000 08:01 132 /usr/bin/node\n"
      "55d0c1a20000-55d0c2a00000 r-xp 00020000 08:01 132 /usr/bin/node\n";
  auto node = exe_mapping_from_maps(maps, "/usr/bin/node");
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->base, 0x55d0c1a00000u);
  EXPECT_EQ(node->file, "08:01:132");
  EXPECT_FALSE(exe_mapping_from_maps(maps, "/bin/node").has_value());
  EXPECT_FALSE(exe_mapping_from_maps("", "/usr/bin/node").has_value());
  EXPECT_FALSE(exe_mapping_from_maps("zz-1 r--p 0 0 0 /x\n", "/x").has_value());
}

TEST(ProcReader, ReadsThisProcess) {
  ProcReader reader;
  auto info = reader.read(getpid());
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->pid, getpid());
  EXPECT_GT(info->start_time, 0u);
  EXPECT_EQ(info->comm, "proc_reader_tes");  // comm is cut at 15 characters
  EXPECT_NE(info->exe.find("proc_reader_test"), std::string::npos);
  auto pids = reader.list_pids();
  EXPECT_NE(std::find(pids.begin(), pids.end(), getpid()), pids.end());
  auto sys = reader.syscall_of(getpid(), getpid());
  ASSERT_TRUE(sys.ok());
  EXPECT_EQ(sys->nr, SYS_read);  // the thread is in the read() of its own syscall file
}

TEST(ProcReader, GoneProcessIsENOENT) {
  ProcReader reader;
  auto info = reader.read(999999999);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code(), ENOENT);
}

// A cgroup v2 named by its id (what an exec event carries) is found where /proc/<pid>/cgroup
// says, by path; a removed one is gone. Truth: the cgroup's id is its directory's inode number.
TEST(Cgroup2Path, ByIdAsProcSaysAndGoneOnceRemoved) {
  const std::string root = testing::cgroup2_root();
  if (root.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy";
  if (geteuid() != 0) GTEST_SKIP() << "open_by_handle_at needs CAP_DAC_READ_SEARCH";
  std::ifstream own("/proc/self/cgroup");
  std::string line;
  std::string mine;
  while (std::getline(own, line)) {
    if (line.starts_with("0::")) mine = line.substr(3);
  }
  ASSERT_FALSE(mine.empty());
  struct stat st {};
  ASSERT_EQ(stat((root + mine).c_str(), &st), 0);
  auto path = cgroup2_path_of(root, st.st_ino);
  ASSERT_TRUE(path.ok()) << path.error().message();
  EXPECT_EQ(*path, mine);

  const std::string made = "/sonde-test-" + std::to_string(getpid()) + "/cri-containerd-" +
                           std::string(64, 'a') + ".scope";
  std::filesystem::create_directories(root + made);
  struct Removed {  // also when an assertion ends the test: a cgroup outlives its test
    std::string leaf, parent;
    ~Removed() {
      (void)rmdir(leaf.c_str());
      (void)rmdir(parent.c_str());
    }
  } removed{root + made, root + made.substr(0, made.rfind('/'))};
  ASSERT_EQ(stat((root + made).c_str(), &st), 0);
  path = cgroup2_path_of(root, st.st_ino);
  ASSERT_TRUE(path.ok()) << path.error().message();
  EXPECT_EQ(*path, made);
  EXPECT_EQ(container_id_from_cgroup("0::" + *path + "\n"), std::string(64, 'a'));
  ASSERT_EQ(rmdir((root + made).c_str()), 0);
  ASSERT_EQ(rmdir((root + made.substr(0, made.rfind('/'))).c_str()), 0);
  auto gone = cgroup2_path_of(root, st.st_ino);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), ENOENT) << gone.error().message();  // is_gone()
}

}  // namespace
}  // namespace sonde::agent
