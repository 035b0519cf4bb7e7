#include "common/kube/backoff.h"

#include <gtest/gtest.h>

namespace sonde::kube {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, GrowsWithJitterUpToTheCapAndResets) {
  Backoff backoff({milliseconds(100), milliseconds(800), 2.0, 0.5}, /*seed=*/7);
  const int64_t bases[] = {100, 200, 400, 800, 800, 800};
  for (int64_t base : bases) {
    const auto d = std::chrono::duration_cast<milliseconds>(backoff.next()).count();
    EXPECT_GE(d, base);
    EXPECT_LT(d, base * 3 / 2 + 1);
  }
  backoff.reset();
  EXPECT_LT(backoff.next(), milliseconds(151));
}

TEST(BackoffTest, JitterSpreadsDelays) {
  Backoff a({milliseconds(1000), milliseconds(1000), 2.0, 1.0}, 1);
  Backoff b({milliseconds(1000), milliseconds(1000), 2.0, 1.0}, 2);
  EXPECT_NE(a.next(), b.next());
}

}  // namespace
}  // namespace sonde::kube
