// The descriptor budget's two kernel-facing parts on this process: raising the soft
// RLIMIT_NOFILE, and counting open descriptors as /proc/self/fd lists them.
#include "agent/runtime/fd_budget.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <vector>

#include "common/unique_fd.h"

namespace sonde::agent {
namespace {

TEST(FdBudgetTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max < 256) GTEST_SKIP() << "hard limit " << original.rlim_max;
  rlimit lowered = original;
  lowered.rlim_cur = 128;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto limits = raise_fd_limit();
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
  ASSERT_TRUE(limits.ok()) << limits.error().message();
  EXPECT_EQ(limits->soft_before, 128u);
  EXPECT_EQ(limits->soft, original.rlim_max);
  EXPECT_EQ(limits->hard, original.rlim_max);
  EXPECT_EQ(now.rlim_cur, original.rlim_max);
  EXPECT_EQ(ProcessDescriptors().soft_limit(), original.rlim_cur);
}

TEST(FdBudgetTest, CountsTheDescriptorsOpenNow) {
  ProcessDescriptors fds;
  auto before = fds.open();
  ASSERT_TRUE(before.ok()) << before.error().message();
  std::vector<UniqueFd> opened;
  for (int i = 0; i < 10; ++i) opened.emplace_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
  auto during = fds.open();
  ASSERT_TRUE(during.ok());
  EXPECT_EQ(*during, *before + 10);
  opened.clear();
  EXPECT_EQ(*fds.open(), *before);
}

}  // namespace
}  // namespace sonde::agent
