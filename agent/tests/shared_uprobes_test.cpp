#include "agent/attach/shared_uprobes.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace sonde::agent {
namespace {

// Counts live attachments so the test sees when one is detached.
struct CountingAttachment : Attachment {
  explicit CountingAttachment(int& live) : live_(live) { ++live_; }
  ~CountingAttachment() override { --live_; }
  int& live_;
};

class SharedUprobesTest : public ::testing::Test {
 protected:
  SharedUprobes::AttachFn attach_fn() {
    return [this](const std::string& path, uint64_t) -> Result<std::unique_ptr<Attachment>> {
      paths_.push_back(path);
      if (fail_next_) {
        fail_next_ = false;
        return errno_error("attach " + path, ENOENT);
      }
      return std::unique_ptr<Attachment>(new CountingAttachment(live_));
    };
  }
  static SharedUprobes::Key key(uint64_t inode, uint64_t offset) {
    SharedUprobes::Key k;
    k.binary.inode = inode;
    k.binary.size = 100;
    k.file_offset = offset;
    k.program = "test";
    return k;
  }

  SharedUprobes uprobes_;
  std::vector<std::string> paths_;
  int live_ = 0;
  bool fail_next_ = false;
};

TEST_F(SharedUprobesTest, OneAttachmentPerKeySharedByPids) {
  for (pid_t pid = 100; pid < 150; ++pid) {
    ASSERT_TRUE(
        uprobes_.acquire(key(7, 0x40), "/proc/" + std::to_string(pid) + "/exe", pid, attach_fn())
            .ok());
  }
  EXPECT_EQ(live_, 1);
  EXPECT_EQ(uprobes_.size(), 1u);
  EXPECT_EQ(uprobes_.attach_count(), 1u);
  ASSERT_EQ(paths_.size(), 1u);
  EXPECT_EQ(paths_[0], "/proc/100/exe");  // attached through the first user's path

  for (pid_t pid = 100; pid < 149; ++pid) uprobes_.release(pid);
  EXPECT_EQ(live_, 1) << "still used by pid 149";
  uprobes_.release(149);
  EXPECT_EQ(live_, 0);
  EXPECT_EQ(uprobes_.size(), 0u);
}

TEST_F(SharedUprobesTest, DifferentFilesOffsetsOrProgramsAreDifferentAttachments) {
  ASSERT_TRUE(uprobes_.acquire(key(7, 0x40), "a", 1, attach_fn()).ok());
  ASSERT_TRUE(uprobes_.acquire(key(8, 0x40), "b", 1, attach_fn()).ok());
  ASSERT_TRUE(uprobes_.acquire(key(7, 0x80), "c", 2, attach_fn()).ok());
  auto other = key(7, 0x40);
  other.program = "other";
  ASSERT_TRUE(uprobes_.acquire(other, "d", 2, attach_fn()).ok());
  EXPECT_EQ(live_, 4);
  uprobes_.release(1);
  EXPECT_EQ(live_, 2);
  uprobes_.release(2);
  EXPECT_EQ(live_, 0);
}

TEST_F(SharedUprobesTest, FailedAttachRecordsNothingAndTheNextUserRetries) {
  fail_next_ = true;
  auto st = uprobes_.acquire(key(7, 0x40), "/proc/1/exe", 1, attach_fn());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ENOENT);
  EXPECT_EQ(uprobes_.size(), 0u);
  uprobes_.release(1);  // nothing to release: no crash
  ASSERT_TRUE(uprobes_.acquire(key(7, 0x40), "/proc/2/exe", 2, attach_fn()).ok());
  EXPECT_EQ(live_, 1);
  EXPECT_EQ(uprobes_.attach_count(), 1u);
}

TEST_F(SharedUprobesTest, ReleasingAnUnknownPidIsHarmless) {
  ASSERT_TRUE(uprobes_.acquire(key(7, 0x40), "a", 1, attach_fn()).ok());
  uprobes_.release(99);
  EXPECT_EQ(live_, 1);
}

}  // namespace
}  // namespace sonde::agent
