// Two pods of one image: two overlay mounts over one read-only lower layer. Each mount reports
// its own st_dev but the lower file's st_ino; the cache must see one binary and parse it once.
// Needs root (mount), hence the `bpf` label.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/probe_target_cache.h"
#include "agent/symbols/tests/temp_dir.h"

namespace sonde::symbols {
namespace {

namespace fs = std::filesystem;

class OverlayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(SONDE_GO_TLS_FIXTURE).empty()) GTEST_SKIP() << "go fixture not built";
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount overlays";
    // A tmpfs of our own, so the overlay layers never depend on what the test's /tmp is.
    root_ = dir_.path() / "fs";
    fs::create_directories(root_);
    ASSERT_EQ(::mount("tmpfs", root_.c_str(), "tmpfs", 0, "size=64m"), 0) << std::strerror(errno);
    mounted_.push_back(root_);
    lower_ = root_ / "lower";
    fs::create_directories(lower_ / "usr/bin");
    fs::copy_file(SONDE_GO_TLS_FIXTURE, lower_ / "usr/bin/app");
    for (const char* pod : {"pod-a", "pod-b"}) {
      const fs::path upper = root_ / pod / "upper";
      const fs::path work = root_ / pod / "work";
      const fs::path merged = root_ / pod / "merged";
      fs::create_directories(upper);
      fs::create_directories(work);
      fs::create_directories(merged);
      const std::string options = "lowerdir=" + lower_.string() + ",upperdir=" + upper.string() +
                                  ",workdir=" + work.string();
      ASSERT_EQ(::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()), 0)
          << std::strerror(errno);
      mounted_.push_back(merged);
      views_.push_back(merged / "usr/bin/app");
    }
  }

  void TearDown() override {
    for (auto it = mounted_.rbegin(); it != mounted_.rend(); ++it) {
      EXPECT_EQ(::umount2(it->c_str(), MNT_DETACH), 0) << *it << ": " << std::strerror(errno);
    }
  }

  testing::TempDir dir_;
  fs::path root_;
  fs::path lower_;
  std::vector<fs::path> mounted_;
  std::vector<fs::path> views_;
};

TEST_F(OverlayTest, TwoOverlayMountsOfOneLayerAreOneKeyAndOneParse) {
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(::stat(views_[0].c_str(), &a), 0);
  ASSERT_EQ(::stat(views_[1].c_str(), &b), 0);
  // The premise of the design: same inode number, different device per mount.
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_NE(a.st_dev, b.st_dev);

  auto id_a = OpenBinary::open(views_[0]);
  auto id_b = OpenBinary::open(views_[1]);
  ASSERT_TRUE(id_a.ok() && id_b.ok());
  EXPECT_EQ(id_a->identity(), id_b->identity());

  ProbeTargetCache cache;
  const std::vector<std::string> names = {"crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read"};
  auto ra = cache.resolve(views_[0], names);
  ASSERT_TRUE(ra.ok()) << ra.error().message();
  // Through /proc/self/root as the agent sees a pod's file via /proc/<pid>/root.
  auto rb = cache.resolve("/proc/self/root" + views_[1].string(), names);
  ASSERT_TRUE(rb.ok()) << rb.error().message();
  EXPECT_EQ(cache.stats().parses, 1u);
  EXPECT_EQ(cache.stats().hits, names.size());
  EXPECT_TRUE((*rb)[0].found);
  EXPECT_EQ((*ra)[0].file_offset, (*rb)[0].file_offset);
}

TEST_F(OverlayTest, CopyUpInOnePodIsANewKey) {
  // A pod that rewrites its binary gets a private copy in its upper layer: a different file.
  const fs::path tmp = views_[1].string() + ".new";
  fs::copy_file(views_[1], tmp);
  fs::rename(tmp, views_[1]);
  auto id_a = OpenBinary::open(views_[0]);
  auto id_b = OpenBinary::open(views_[1]);
  ASSERT_TRUE(id_a.ok() && id_b.ok());
  EXPECT_NE(id_a->identity(), id_b->identity());
}

}  // namespace
}  // namespace sonde::symbols
