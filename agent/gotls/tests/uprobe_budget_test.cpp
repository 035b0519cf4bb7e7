// UprobeBudget's own promises, beyond what TlsMonitor's test sees through a whole consider(): a
// refusal says which bound refused and takes nothing, and descriptors set aside for an attach in
// flight count against the reserve until it is done.
#include "agent/gotls/uprobe_budget.h"

#include <gtest/gtest.h>

namespace sonde::agent {
namespace {

class FixedDescriptors final : public Descriptors {
 public:
  Result<size_t> open() const override { return open_now; }
  uint64_t soft_limit() const override { return 1024; }
  size_t open_now = 0;
};

using Bound = UprobeBudget::Refusal::Bound;

TEST(UprobeBudgetTest, ARefusalSaysWhichBoundRefusedAndTakesNothing) {
  SharedUprobes uprobes;
  UprobeBudget budget({.max_binaries = 2}, uprobes);
  const UprobeBudget::Limits limits{{"shop/api", 10}};
  ASSERT_FALSE(budget.use(100, "a", /*sites=*/6, /*fds=*/0, false, limits, "/srv/a"));

  auto refused = budget.use(200, "b", 6, 0, false, limits, "/srv/b");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->bound, Bound::kPolicy);
  EXPECT_NE(refused->why.find("policy shop/api"), std::string::npos) << refused->why;
  EXPECT_EQ(budget.instrumented_binaries(), 1u) << "/srv/b took no slot";
  EXPECT_TRUE(budget.not_instrumented().empty()) << "a policy's refusals are not the node's";

  ASSERT_FALSE(budget.use(200, "b", 6, 0, false, {}, "/srv/b")) << "no policy limits it";
  refused = budget.use(300, "c", 6, 0, false, {}, "/srv/c");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->bound, Bound::kNode);
  EXPECT_NE(refused->why.find("/srv/c would be one more"), std::string::npos) << refused->why;
  EXPECT_EQ(budget.not_instrumented(), (std::map<std::string, uint64_t>{{"binary_limit", 1}}));
  EXPECT_EQ(budget.policy_uprobes(), (std::map<std::string, size_t>{{"shop/api", 6}}));
  EXPECT_FALSE(budget.use(301, "kept", 6, 0, /*attached=*/true, {}, "/srv/kept"))
      << "a binary kept after its last exit holds its slot already";
  budget.unuse(301, "kept");

  budget.unuse(100, "a");
  EXPECT_TRUE(budget.policy_uprobes().empty());
  EXPECT_EQ(budget.instrumented_binaries(), 1u);
  EXPECT_FALSE(budget.use(300, "c", 6, 0, false, {}, "/srv/c")) << "/srv/a's slot is free";
}

TEST(UprobeBudgetTest, DescriptorsOfAnAttachInFlightCountUntilItIsDone) {
  SharedUprobes uprobes;
  FixedDescriptors fds;
  UprobeBudget budget({.fds = &fds}, uprobes);
  fds.open_now = 1024 - kFdReserve - 6;  // room for 6 more
  ASSERT_FALSE(budget.use(100, "a", 9, /*fds=*/4, false, {}, "/srv/a"));
  EXPECT_FALSE(budget.room_for(3)) << "4 set aside for /srv/a, 2 left";
  auto refused = budget.use(200, "b", 9, 3, false, {}, "/srv/b");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->bound, Bound::kNode);
  EXPECT_EQ(budget.not_instrumented(), (std::map<std::string, uint64_t>{{"fd_reserve", 1}}));

  fds.open_now += 4;  // /srv/a's links are open now
  budget.attach_done(4);
  EXPECT_TRUE(budget.room_for(2));
  EXPECT_FALSE(budget.room_for(3));
}

}  // namespace
}  // namespace sonde::agent
