#include "agent/runtime/container_totals.h"

#include <gtest/gtest.h>

namespace sonde::agent {
namespace {

const ContainerLabels kShop{"shop", "checkout-1", "app"};
const ContainerLabels kOther{"shop", "checkout-2", "app"};
constexpr uint64_t kGrace = 300;

uint64_t value_of(const std::vector<ContainerTotals::Total>& totals, const ContainerLabels& l) {
  for (const auto& t : totals) {
    if (t.labels == l) return t.value;
  }
  ADD_FAILURE() << "no series for " << l.pod;
  return 0;
}

TEST(ContainerTotals, FoldsFinishedProcessesIntoTheContainer) {
  ContainerTotals totals(kGrace);
  totals.started(kShop);
  totals.started(kShop);
  auto r = totals.report({{kShop, 30}}, 0);
  EXPECT_EQ(value_of(r, kShop), 30u);
  // One process exits with 20; the other's live value is 15.
  totals.finished(kShop, 20, 10);
  r = totals.report({{kShop, 15}}, 11);
  EXPECT_EQ(value_of(r, kShop), 35u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].processes, 1u);
}

TEST(ContainerTotals, NeverGoesBackwards) {
  ContainerTotals totals(kGrace);
  totals.started(kShop);
  EXPECT_EQ(value_of(totals.report({{kShop, 50}}, 0), kShop), 50u);
  // The kernel entry was lost: the live value reads lower than before.
  EXPECT_EQ(value_of(totals.report({{kShop, 10}}, 1), kShop), 50u);
  EXPECT_EQ(value_of(totals.report({{kShop, 70}}, 2), kShop), 70u);
}

TEST(ContainerTotals, PidReuseInAContainerOnlyAdds) {
  ContainerTotals totals(kGrace);
  totals.started(kShop);
  totals.finished(kShop, 40, 5);
  totals.started(kShop);  // the same pid, a new program
  EXPECT_EQ(value_of(totals.report({{kShop, 1}}, 6), kShop), 41u);
}

TEST(ContainerTotals, ForgetsAContainerAGracePeriodAfterItsLastProcess) {
  ContainerTotals totals(kGrace);
  totals.started(kShop);
  totals.started(kOther);
  totals.finished(kShop, 40, 100);
  auto r = totals.report({{kOther, 5}}, 100 + kGrace - 1);
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(value_of(r, kShop), 40u);
  r = totals.report({{kOther, 6}}, 100 + kGrace);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].labels, kOther);
  EXPECT_EQ(totals.size(), 1u);
}

TEST(ContainerTotals, AProcessComingBackWithinTheGraceKeepsTheSeries) {
  ContainerTotals totals(kGrace);
  totals.started(kShop);
  totals.finished(kShop, 40, 100);
  totals.started(kShop);  // the container restarted
  auto r = totals.report({{kShop, 2}}, 100 + 10 * kGrace);
  EXPECT_EQ(value_of(r, kShop), 42u);
}

// Each bucket of a histogram is a counter of its own: folded, and never backwards, bucket by
// bucket (a process whose entry was lost keeps its last buckets, another one's still add).
TEST(ContainerTotals, HistogramsFoldAndNeverGoBackwardsPerBucket) {
  using H = Histogram<3>;
  ContainerTotalsOf<H> totals(kGrace);
  totals.started(kShop);
  totals.started(kShop);
  totals.finished(kShop, H{{2, 0, 1}, 700}, 5);
  auto r = totals.report({{kShop, H{{0, 4, 0}, 80}}}, 6);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].value.counts, (std::array<uint64_t, 3>{2, 4, 1}));
  EXPECT_EQ(r[0].value.sum, 780u);
  EXPECT_EQ(r[0].value.count(), 7u);
  // The live process's entry was lost (reads empty) while a bucket of the container grew.
  totals.finished(kShop, H{{1, 0, 0}, 10}, 7);
  r = totals.report({}, 8);
  EXPECT_EQ(r[0].value.counts, (std::array<uint64_t, 3>{3, 4, 1}));
  EXPECT_EQ(r[0].value.sum, 780u);
}

}  // namespace
}  // namespace sonde::agent
