#include "operator/options.h"

#include <gtest/gtest.h>

namespace sonde::op {
namespace {

TEST(OptionsTest, ParsesFlagsInBothForms) {
  auto options =
      parse_options({"--kubeconfig", "/k", "--namespace=team-a", "--workers", "4",
                     "--lease-duration=2s", "--renew-deadline", "1500ms", "--retry-period=200ms",
                     "--leader-elect=false", "--leader-election-identity", "op-1"});
  ASSERT_TRUE(options.ok()) << options.error().message();
  EXPECT_EQ(options->kubeconfig, "/k");
  EXPECT_EQ(options->policy_namespace, "team-a");
  EXPECT_EQ(options->workers, 4);
  EXPECT_EQ(options->lease_duration, std::chrono::seconds(2));
  EXPECT_EQ(options->renew_deadline, std::chrono::milliseconds(1500));
  EXPECT_EQ(options->retry_period, std::chrono::milliseconds(200));
  EXPECT_FALSE(options->leader_elect);
  EXPECT_EQ(options->identity, "op-1");
}

TEST(OptionsTest, DefaultsMatchClientGo) {
  auto options = parse_options({});
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->lease_duration, std::chrono::seconds(15));
  EXPECT_EQ(options->renew_deadline, std::chrono::seconds(10));
  EXPECT_EQ(options->retry_period, std::chrono::seconds(2));
  EXPECT_TRUE(options->leader_elect);
  EXPECT_EQ(options->workers, 2);
  EXPECT_EQ(options->log.format, "logfmt");
}

TEST(OptionsTest, SharesTheLogFlagsAndTakesBareBooleans) {
  auto options = parse_options({"--leader-elect", "--log-format=json", "--log-level", "debug"});
  ASSERT_TRUE(options.ok()) << options.error().message();
  EXPECT_TRUE(options->leader_elect);
  EXPECT_EQ(options->log.format, "json");
  EXPECT_EQ(options->log.level, "debug");
}

TEST(OptionsTest, RejectsBadInput) {
  EXPECT_FALSE(parse_options({"--bogus"}).ok());
  EXPECT_FALSE(parse_options({"--workers", "0"}).ok());
  EXPECT_FALSE(parse_options({"--kubeconfig"}).ok());
  EXPECT_FALSE(parse_options({"--lease-duration=15"}).ok());
  EXPECT_FALSE(parse_duration("1.5s").ok());
  EXPECT_FALSE(parse_options({"--log-level", "loud"}).ok());
  EXPECT_FALSE(parse_options({"--leader-elect=maybe"}).ok());
  // The error names the flag at fault.
  auto bad = parse_options({"--renew-deadline", "10"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("--renew-deadline"), std::string::npos)
      << bad.error().message();
}

}  // namespace
}  // namespace sonde::op
