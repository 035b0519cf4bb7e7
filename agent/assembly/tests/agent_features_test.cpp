// AgentFeatures: the features' own flags on each mode's command line, their checks of those
// flags, their doctor checks and what they say about an executable, through the composition
// root's one list of modules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/assembly/agent_flags.h"
#include "agent/assembly/agent_parts.h"
#include "common/cli.h"

namespace sonde::agent {
namespace {

cli::ParseOutcome parse(AgentFlags& flags, bool in_cluster, const std::vector<std::string>& args) {
  CLI::App app{"test", "sonde-agent"};
  add_agent_flags(app, flags, "x", "info", in_cluster);
  return cli::parse_args(app, args);
}

TEST(AgentFeaturesTest, EachModeTakesTheFeaturesFlagsAndOnlyTheClusterThePyroscopePush) {
  for (const bool in_cluster : {false, true}) {
    AgentFlags flags;
    EXPECT_EQ(parse(flags, in_cluster,
                    {"--wait-source", "libc-uprobes", "--nodejs-metrics", "otel",
                     "--max-go-tls-binaries", "7", "--go-tls-keep-probes-seconds", "0",
                     "--go-tls-perform-ret", "--max-cpu-frequency-hz", "49"})
                  .exit_code,
              std::nullopt)
        << "in_cluster " << in_cluster;
  }
  AgentFlags cluster;
  EXPECT_EQ(parse(cluster, true, {"--pyroscope-url", "http://p:4040"}).exit_code, std::nullopt);
  EXPECT_TRUE(cluster.features.check_flags().ok());
  AgentFlags standalone;
  const auto refused = parse(standalone, false, {"--pyroscope-url", "http://p:4040"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--pyroscope-url"), std::string::npos) << refused.err;
}

TEST(AgentFeaturesTest, AFlagOutOfItsFeaturesBoundsIsAUsageError) {
  AgentFlags flags;
  const auto out = parse(flags, true, {"--max-go-tls-binaries", "0"});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_NE(out.err.find("--max-go-tls-binaries"), std::string::npos) << out.err;
  AgentFlags source;
  EXPECT_EQ(parse(source, true, {"--wait-source", "kprobes"}).exit_code, 2);
}

TEST(AgentFeaturesTest, APushThatIsNotPlainHttpIsRefusedNamingItsFlag) {
  AgentFlags flags;
  ASSERT_EQ(parse(flags, true, {"--pyroscope-url", "https://p:4040"}).exit_code, std::nullopt);
  const Status st = flags.features.check_flags();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(),
            "pyroscope-url: must be an http://host[:port][/prefix] URL, got \"https://p:4040\"");
  AgentFlags unnamed;
  ASSERT_EQ(parse(unnamed, true, {"--pyroscope-url", "http://p", "--pyroscope-application", ""})
                .exit_code,
            std::nullopt);
  EXPECT_FALSE(unnamed.features.check_flags().ok());
}

TEST(AgentFeaturesTest, EveryFeatureModuleOffersItsDoctorChecks) {
  const AgentFeatures features;
  // Node.js, Go TLS and the CPU profiler's, in start order (the CPU profiler has none).
  EXPECT_EQ(features.node_checks().size(), 3U);
}

TEST(AgentFeaturesTest, AnExecutableIsExplainedByTheFeaturesThatInstrumentBinaries) {
  const AgentFeatures features;
  std::string text;
  nlohmann::json json;
  ASSERT_TRUE(features.explain_binary("/bin/true", text, json).ok());
  EXPECT_NE(text.find("go tls        not a Go TLS user"), std::string::npos) << text;
  EXPECT_EQ(json.at("path"), "/bin/true");
  EXPECT_EQ(json.at("go_tls_user"), false);
  const Status missing = features.explain_binary("/nonexistent/sonde-test", text, json);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("/nonexistent/sonde-test"), std::string::npos);
}

}  // namespace
}  // namespace sonde::agent
