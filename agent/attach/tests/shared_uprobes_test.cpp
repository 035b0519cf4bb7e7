#include "agent/attach/shared_uprobes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <thread>

#include "agent/tests/counting_attachment.h"
#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

// An attachment whose detach takes until the test says so, like a link's close waiting for
// the kernel's grace period; it says when the detach began and records when it ended.
struct SlowAttachment : Attachment {
  SlowAttachment(std::shared_future<void> go, std::atomic<bool>& began,
                 std::vector<std::string>& log)
      : go_(std::move(go)), began_(began), log_(log) {}
  ~SlowAttachment() override {
    began_ = true;
    go_.wait();
    log_.push_back("detached");
  }
  std::shared_future<void> go_;
  std::atomic<bool>& began_;
  std::vector<std::string>& log_;
};

class SharedUprobesTest : public ::testing::Test {
 protected:
  explicit SharedUprobesTest(uint64_t linger_ns = 0) : uprobes_(linger_ns, clock_) {}

  SharedUprobes::AttachFn attach_fn() {
    return [this](const std::string& path) -> Result<std::unique_ptr<Attachment>> {
      paths_.push_back(path);
      if (fail_next_) {
        fail_next_ = false;
        return errno_error("attach " + path, ENOENT);
      }
      return std::unique_ptr<Attachment>(new testing::CountingAttachment(live_));
    };
  }
  static SharedUprobes::Key key(uint64_t inode, std::string program = "test") {
    SharedUprobes::Key k;
    k.binary.inode = inode;
    k.binary.size = 100;
    k.program = std::move(program);
    return k;
  }
  // pid uses the attachment of each key, attached by `attach` when there is none.
  Status acquire(std::vector<SharedUprobes::Key> keys, const std::string& path, pid_t pid,
                 const SharedUprobes::AttachFn& attach) {
    std::vector<SharedUprobes::Request> requests;
    for (auto& k : keys) requests.push_back({std::move(k), attach});
    return uprobes_.acquire(requests, path, pid);
  }

  ::sonde::testing::ManualClock clock_;
  SharedUprobes uprobes_;
  std::vector<std::string> paths_;
  std::atomic<int> live_ = 0;
  bool fail_next_ = false;
};

TEST_F(SharedUprobesTest, OneAttachmentPerKeySharedByPids) {
  for (pid_t pid = 100; pid < 150; ++pid) {
    ASSERT_TRUE(acquire({key(7)}, "/proc/" + std::to_string(pid) + "/exe", pid, attach_fn()).ok());
  }
  EXPECT_EQ(live_, 1);
  EXPECT_EQ(uprobes_.size(), 1u);
  EXPECT_EQ(uprobes_.attach_count(), 1u);
  ASSERT_EQ(paths_.size(), 1u);
  EXPECT_EQ(paths_[0], "/proc/100/exe");  // attached through the first user's path

  for (pid_t pid = 100; pid < 149; ++pid) uprobes_.release(pid);
  uprobes_.flush();
  EXPECT_EQ(live_, 1) << "still used by pid 149";
  uprobes_.release(149);
  uprobes_.flush();
  EXPECT_EQ(live_, 0);
  EXPECT_EQ(uprobes_.size(), 0u);
}

TEST_F(SharedUprobesTest, DifferentFilesOrProgramsAreDifferentAttachments) {
  ASSERT_TRUE(acquire({key(7)}, "a", 1, attach_fn()).ok());
  ASSERT_TRUE(acquire({key(8)}, "b", 1, attach_fn()).ok());
  ASSERT_TRUE(acquire({key(7, "other")}, "c", 2, attach_fn()).ok());
  ASSERT_TRUE(acquire({key(7)}, "d", 2, attach_fn()).ok());
  EXPECT_EQ(live_, 3);
  uprobes_.release(1);
  uprobes_.flush();
  EXPECT_EQ(live_, 2) << "key 7 is still used by pid 2";
  uprobes_.release(2);
  uprobes_.flush();
  EXPECT_EQ(live_, 0);
}

// A process gets all its programs' attachments or none: when one attach fails, pid uses none,
// what the call attached is detached (off the caller), and what others use stays.
TEST_F(SharedUprobesTest, AllOrNone) {
  ASSERT_TRUE(acquire({key(7, "write")}, "a", 1, attach_fn()).ok());
  int attempts = 0;
  auto second_fails = [&](const std::string& path) -> Result<std::unique_ptr<Attachment>> {
    if (++attempts == 2) return errno_error("attach " + path, EMFILE);
    return std::unique_ptr<Attachment>(new testing::CountingAttachment(live_));
  };
  // write is attached (pid 1's), read is attached by this call, read_return fails.
  auto st = acquire({key(7, "write"), key(7, "read"), key(7, "read_return")}, "b", 2, second_fails);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), EMFILE);
  EXPECT_EQ(attempts, 2);
  uprobes_.flush();
  EXPECT_EQ(live_, 1) << "only pid 1's write attachment is left";
  EXPECT_EQ(uprobes_.size(), 1u);
  uprobes_.release(2);  // pid 2 uses nothing
  uprobes_.flush();
  EXPECT_EQ(live_, 1);
  EXPECT_EQ(uprobes_.missing({{key(7, "write"), attach_fn()}, {key(7, "read"), attach_fn()}}), 1u);
  uprobes_.release(1);
  uprobes_.flush();
  EXPECT_EQ(live_, 0);
}

TEST_F(SharedUprobesTest, FailedAttachRecordsNothingAndTheNextUserRetries) {
  fail_next_ = true;
  auto st = acquire({key(7)}, "/proc/1/exe", 1, attach_fn());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ENOENT);
  EXPECT_EQ(uprobes_.size(), 0u);
  uprobes_.release(1);  // nothing to release: no crash
  ASSERT_TRUE(acquire({key(7)}, "/proc/2/exe", 2, attach_fn()).ok());
  EXPECT_EQ(live_, 1);
  EXPECT_EQ(uprobes_.attach_count(), 1u);
}

TEST_F(SharedUprobesTest, ReleasingAnUnknownPidIsHarmless) {
  ASSERT_TRUE(acquire({key(7)}, "a", 1, attach_fn()).ok());
  uprobes_.release(99);
  uprobes_.flush();
  EXPECT_EQ(live_, 1);
}

// The caller of release() (the event thread) does not wait for a detach; a new process of the
// file takes over an attachment not detached yet, and one that comes while its attachment is
// being detached waits, so two links never fire for one site.
TEST_F(SharedUprobesTest, DetachesOffTheCallerAndNeverTwoLinksForOneSite) {
  std::promise<void> go;
  const std::shared_future<void> detach_may_end = go.get_future().share();
  std::atomic<bool> detach_began = false;
  std::vector<std::string> log;  // ordered by SharedUprobes' lock: see the comment at the end
  auto slow = [&](const std::string&) -> Result<std::unique_ptr<Attachment>> {
    log.emplace_back("attached");
    return std::unique_ptr<Attachment>(new SlowAttachment(detach_may_end, detach_began, log));
  };
  ASSERT_TRUE(acquire({key(7)}, "a", 1, slow).ok());
  ASSERT_TRUE(acquire({key(8)}, "b", 2, attach_fn()).ok());
  uprobes_.release(1);  // returns although the detach cannot end yet
  while (!detach_began) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // Released while the detach thread is busy, and taken over before it gets to it.
  uprobes_.release(2);
  ASSERT_TRUE(acquire({key(8)}, "b", 3, attach_fn()).ok());
  EXPECT_EQ(uprobes_.attach_count(), 2u) << "pid 3 took over key 8's attachment";

  // A new process of key 7's file while its old link is still being detached.
  auto again = std::async(std::launch::async, [&] { return acquire({key(7)}, "a", 4, slow); });
  EXPECT_EQ(again.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "attached while the site's old link was still being detached";
  go.set_value();
  ASSERT_TRUE(again.get().ok());
  // The detach thread wrote "detached" before it took the lock to say it was done; the new
  // attach happened under the lock after that.
  EXPECT_EQ(log, (std::vector<std::string>{"attached", "detached", "attached"}));
  EXPECT_EQ(uprobes_.attach_count(), 3u);
  uprobes_.flush();
  EXPECT_EQ(live_, 1) << "key 8's attachment, used by pid 3";
  uprobes_.release(4);  // the new key-7 attachment writes to `log` when detached: before it goes
  uprobes_.flush();
}

// Kept idle for a minute after the last user, as a short-lived program's binary is.
class LingeringSharedUprobesTest : public SharedUprobesTest {
 protected:
  static constexpr uint64_t kLinger = 60'000'000'000;
  LingeringSharedUprobesTest() : SharedUprobesTest(kLinger) {}
};

TEST_F(LingeringSharedUprobesTest, AnIdleAttachmentIsKeptAndTakenOverWithoutAnAttach) {
  ASSERT_TRUE(acquire({key(7, "read"), key(7, "write")}, "a", 1, attach_fn()).ok());
  uprobes_.release(1);
  uprobes_.flush();
  EXPECT_EQ(live_, 2) << "detached although the linger has not passed";
  EXPECT_EQ(uprobes_.idle_binaries(), 1u);

  clock_.advance_ns(kLinger - 1);
  uprobes_.expire();
  uprobes_.flush();
  EXPECT_EQ(live_, 2);
  ASSERT_TRUE(acquire({key(7, "read"), key(7, "write")}, "a", 2, attach_fn()).ok());
  EXPECT_EQ(uprobes_.attach_count(), 2u) << "the next run of the binary attached again";
  EXPECT_EQ(uprobes_.idle_binaries(), 0u);

  // Idle again: the linger counts from the last release, not the first.
  clock_.advance_ns(kLinger);
  uprobes_.release(2);
  clock_.advance_ns(kLinger - 1);
  uprobes_.expire();
  uprobes_.flush();
  EXPECT_EQ(live_, 2);
  clock_.advance_ns(1);
  uprobes_.expire();
  uprobes_.flush();
  EXPECT_EQ(live_, 0);
  EXPECT_EQ(uprobes_.size(), 0u);
  EXPECT_EQ(uprobes_.idle_binaries(), 0u);
}

TEST_F(LingeringSharedUprobesTest, EvictionDetachesTheBinaryIdleTheLongestFirst) {
  EXPECT_FALSE(uprobes_.evict_oldest_idle()) << "nothing is idle";
  for (uint64_t inode : {7, 8, 9}) {
    auto pid = static_cast<pid_t>(inode);
    ASSERT_TRUE(acquire({key(inode, "read"), key(inode, "write")}, "p", pid, attach_fn()).ok());
  }
  clock_.advance_ns(1);
  uprobes_.release(8);
  clock_.advance_ns(1);
  uprobes_.release(7);
  EXPECT_EQ(uprobes_.idle_binaries(), 2u);

  ASSERT_TRUE(uprobes_.evict_oldest_idle());
  EXPECT_EQ(live_, 4) << "both of binary 8's attachments, and only those, detached on return";
  EXPECT_EQ(uprobes_.idle_binaries(), 1u);
  ASSERT_TRUE(acquire({key(8, "read")}, "p", 10, attach_fn()).ok());
  EXPECT_EQ(uprobes_.attach_count(), 7u) << "binary 8 was attached anew";
  ASSERT_TRUE(acquire({key(7, "read")}, "p", 11, attach_fn()).ok());
  EXPECT_EQ(uprobes_.attach_count(), 7u) << "binary 7 was still attached";

  ASSERT_TRUE(uprobes_.evict_oldest_idle()) << "binary 7's write attachment is still idle";
  EXPECT_EQ(live_, 4);
  EXPECT_FALSE(uprobes_.evict_oldest_idle());
  EXPECT_EQ(live_, 4) << "in-use attachments are never evicted";
}

}  // namespace
}  // namespace sonde::agent
