// Go TLS takes its parameters from the asker's limits (goTLS.crd.yaml's `limits`), through the
// registry's with_limits(): what the policy selector and the standalone config hand the feature.
#include "agent/gotls/gotls_params.h"

#include <gtest/gtest.h>

#include "common/instrumentation.h"

namespace sonde {
namespace {

Instrumentations asking_go_tls_and_cpu() {
  Instrumentations asked;
  asked[Instrumentation::kGoTls] = default_params(Instrumentation::kGoTls);
  asked[Instrumentation::kCpu] = default_params(Instrumentation::kCpu);
  return asked;
}

TEST(GoTlsParams, APolicysLimitsBecomeItsUprobeLimitAndABudgetNamingItsGeneration) {
  const Instrumentations asked = asking_go_tls_and_cpu();
  const Instrumentations limited = with_limits(asked, Asker{.name = "shop/web",
                                                            .generation = 7,
                                                            .max_uprobes_per_node = 40,
                                                            .max_overhead_percent = 2.5});
  const auto& p = limited[Instrumentation::kGoTls].as<GoTlsParams>();
  EXPECT_EQ(p.uprobe_limits, (std::map<std::string, int64_t>{{"shop/web", 40}}));
  ASSERT_TRUE(p.overhead_budget.has_value());
  EXPECT_EQ(*p.overhead_budget, (OverheadBudget{2.5, "shop/web@7"}));
  // A kind that takes no limits is handed on as asked.
  EXPECT_EQ(limited[Instrumentation::kCpu], asked[Instrumentation::kCpu]);
  EXPECT_FALSE(limited[Instrumentation::kNodejsEventLoop].has_value());
}

TEST(GoTlsParams, TheConfigsBudgetIsNamedConfigAndWithoutItThereIsNone) {
  const Instrumentations asked = asking_go_tls_and_cpu();
  const auto budgeted =
      with_limits(asked,
                  Asker{.name = "config", .max_overhead_percent = 1})[Instrumentation::kGoTls]
          .as<GoTlsParams>();
  EXPECT_TRUE(budgeted.uprobe_limits.empty());
  EXPECT_EQ(budgeted.overhead_budget, (OverheadBudget{1, "config"}));
  const auto plain =
      with_limits(asked, Asker{.name = "config"})[Instrumentation::kGoTls].as<GoTlsParams>();
  EXPECT_EQ(plain, GoTlsParams{});
}

TEST(GoTlsParams, TwoPoliciesMergeToBothUprobeLimitsAndTheStricterBudget) {
  const auto& kind = kind_of(Instrumentation::kGoTls);
  const auto a = with_limits(
      asking_go_tls_and_cpu(),
      Asker{.name = "a/x", .generation = 1, .max_uprobes_per_node = 10, .max_overhead_percent = 3});
  const auto b = with_limits(
      asking_go_tls_and_cpu(),
      Asker{.name = "b/y", .generation = 4, .max_uprobes_per_node = 20, .max_overhead_percent = 1});
  const InstrumentationParams both =
      kind.merge(a[Instrumentation::kGoTls], b[Instrumentation::kGoTls]);
  const auto& merged = both.as<GoTlsParams>();
  EXPECT_EQ(merged.uprobe_limits, (std::map<std::string, int64_t>{{"a/x", 10}, {"b/y", 20}}));
  EXPECT_EQ(merged.overhead_budget, (OverheadBudget{1, "a/x@1,b/y@4"}));
  EXPECT_EQ(kinds_taking(LimitKey::kMaxOverheadPercent), "goTLS");
}

}  // namespace
}  // namespace sonde
