// GoTlsVerdicts' own promises: its bound, which plan of a binary stays, and LimitExceeded said
// once per binary until a process of it is instrumented.
#include "agent/gotls/go_tls_verdicts.h"

#include <gtest/gtest.h>

#include <string>

namespace sonde::agent {
namespace {

GoTlsPlan plan(const std::string& path, const std::string& reason, bool reported = true) {
  GoTlsPlan p;
  p.verdict.path = path;
  p.verdict.reason = reason;
  p.verdict.reported = reported;
  return p;
}

TEST(GoTlsVerdictsTest, RemembersAtMostKMaxVerdictsAndAlwaysTheNewest) {
  GoTlsVerdicts verdicts;
  for (size_t i = 0; i <= GoTlsVerdicts::kMaxVerdicts; ++i) {
    const std::string key = "inode=" + std::to_string(i);
    verdicts.remember(key, plan(key, "go1.22"));
    ASSERT_TRUE(verdicts.find(key)) << key;
  }
  EXPECT_EQ(verdicts.size(), GoTlsVerdicts::kMaxVerdicts);
  EXPECT_EQ(verdicts.reported().size(), GoTlsVerdicts::kMaxVerdicts);
}

TEST(GoTlsVerdictsTest, TheFirstPlanOfABinaryStaysUntilReplaced) {
  GoTlsVerdicts verdicts;
  verdicts.remember("a", plan("/srv/api", "go1.22"));
  verdicts.remember("a", plan("/srv/api", "planned twice"));
  EXPECT_EQ(verdicts.find("a")->verdict.reason, "go1.22");
  verdicts.replace("a", plan("/srv/api", "uprobes refused"));
  EXPECT_EQ(verdicts.find("a")->verdict.reason, "uprobes refused");
  EXPECT_EQ(verdicts.size(), 1u);
  EXPECT_FALSE(verdicts.find("b"));
}

TEST(GoTlsVerdictsTest, OnlyReportedVerdictsAreListed) {
  GoTlsVerdicts verdicts;
  verdicts.remember("a", plan("/srv/api", "go1.22"));
  verdicts.remember("b", plan("/bin/sh", "", /*reported=*/false));
  ASSERT_EQ(verdicts.reported().size(), 1u);
  EXPECT_EQ(verdicts.reported()[0].path, "/srv/api");
}

TEST(GoTlsVerdictsTest, LimitExceededIsNewOncePerBinaryUntilAProcessOfItIsInstrumented) {
  GoTlsVerdicts verdicts;
  verdicts.remember("a", plan("/srv/api", "go1.22"));
  EXPECT_TRUE(verdicts.exceed_limit("a", "binary limit"));
  EXPECT_FALSE(verdicts.exceed_limit("a", "fd reserve")) << "said already";
  EXPECT_EQ(verdicts.find("a")->verdict.limit_exceeded, "fd reserve") << "the latest reason";
  verdicts.within_limit("a");
  EXPECT_TRUE(verdicts.find("a")->verdict.limit_exceeded.empty());
  EXPECT_TRUE(verdicts.exceed_limit("a", "binary limit")) << "new again";

  EXPECT_FALSE(verdicts.exceed_limit("b", "binary limit")) << "no verdict, nothing to say";
  EXPECT_FALSE(verdicts.find("b"));
}

}  // namespace
}  // namespace sonde::agent
