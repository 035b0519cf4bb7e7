// The per-hit uprobe costs measured on the real kernel: the probes fire on every call (the
// measurement fails otherwise), and the figures are printed for the record; their size is the
// benchmarks' business (bench/RESULTS.md), not a test's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "agent/kernel/uprobe_cost.h"

namespace sonde::agent {
namespace {

TEST(UprobeCostBpfTest, EveryCallHitsTheProbeAndTheCostsAreFigures) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the probe targets are x86-64 assembly";
#endif
  auto costs = measure_uprobe_hit_costs(2000);
  ASSERT_TRUE(costs.ok()) << costs.error().message();
  EXPECT_TRUE(std::isfinite(costs->emulated_ns));
  EXPECT_TRUE(std::isfinite(costs->single_step_ns));
  std::printf("uprobe hit: emulated +%.0f ns, single-stepped +%.0f ns\n", costs->emulated_ns,
              costs->single_step_ns);
}

}  // namespace
}  // namespace sonde::agent
