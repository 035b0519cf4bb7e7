#include "common/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "agent/cpu/cpu_params.h"
#include "agent/nodejs/nodejs_params.h"

namespace sonde {
namespace {

TEST(Config, EmptyMeansDefaults) {
  auto cfg = parse_agent_config("", "<test>");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  EXPECT_EQ(cfg->metrics_address, "127.0.0.1:9464") << "standalone serves on loopback unless told";
  EXPECT_EQ(cfg->symbol_cache_entries, 4096u);
  EXPECT_TRUE(cfg->instrumentations[Instrumentation::kNodejsEventLoop]);
  EXPECT_TRUE(cfg->instrumentations[Instrumentation::kGoTls]);
  EXPECT_FALSE(cfg->instrumentations[Instrumentation::kCpu]);
  EXPECT_EQ(cfg->instrumentations, AgentConfig{}.instrumentations);
  EXPECT_TRUE(cfg->targets.empty());
  EXPECT_EQ(cfg->max_overhead_percent, std::nullopt);
}

TEST(Config, FullFile) {
  auto cfg = parse_agent_config(R"(
metricsAddress: "127.0.0.1:9000"
logLevel: debug
symbolCache: {maxEntries: 128}
targets:
  - exe: "/usr/bin/node*"
  - containerId: "0123456789abcdef"
instrumentations:
  nodejsEventLoop: false
  goTLS: true
  cpu:
    enabled: true
    frequencyHz: 99
    pyroscope: {url: "http://127.0.0.1:4040/ingest-prefix", intervalSeconds: 10}
limits:
  maxOverheadPercent: 2.5
)",
                                "<test>");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  EXPECT_EQ(cfg->metrics_address, "127.0.0.1:9000");
  EXPECT_EQ(cfg->log_level, "debug");
  EXPECT_EQ(cfg->symbol_cache_entries, 128u);
  ASSERT_EQ(cfg->targets.size(), 2u);
  EXPECT_EQ(cfg->targets[0].exe_glob, "/usr/bin/node*");
  EXPECT_EQ(cfg->targets[1].container_id, "0123456789abcdef");
  EXPECT_FALSE(cfg->instrumentations[Instrumentation::kNodejsEventLoop]);
  EXPECT_TRUE(cfg->instrumentations[Instrumentation::kGoTls]);
  ASSERT_TRUE(cfg->instrumentations[Instrumentation::kCpu]);
  const auto& cpu = cfg->instrumentations[Instrumentation::kCpu].as<CpuParams>();
  EXPECT_EQ(cpu.frequency_hz, 99u);
  EXPECT_EQ(cpu.pyroscope.url, "http://127.0.0.1:4040/ingest-prefix");
  EXPECT_EQ(cpu.pyroscope.interval_seconds, 10u);
  EXPECT_EQ(cpu.pyroscope.application, "sonde");
  EXPECT_EQ(cfg->max_overhead_percent, 2.5);
}

TEST(Config, NodejsStallThreshold) {
  auto cfg =
      parse_agent_config("instrumentations: {nodejsEventLoop: {stallThresholdMs: 100}}", "<test>");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  ASSERT_TRUE(cfg->instrumentations[Instrumentation::kNodejsEventLoop]);
  EXPECT_EQ(cfg->instrumentations[Instrumentation::kNodejsEventLoop]
                .as<NodejsParams>()
                .stall_threshold_ms,
            100u);
  // `true` and an empty object turn the kind on with no stall recording.
  for (const char* yaml :
       {"instrumentations: {nodejsEventLoop: true}", "instrumentations: {nodejsEventLoop: {}}"}) {
    auto c = parse_agent_config(yaml, "<test>");
    ASSERT_TRUE(c.ok()) << yaml << ": " << c.error().message();
    ASSERT_TRUE(c->instrumentations[Instrumentation::kNodejsEventLoop]) << yaml;
    EXPECT_EQ(c->instrumentations[Instrumentation::kNodejsEventLoop]
                  .as<NodejsParams>()
                  .stall_threshold_ms,
              0u)
        << yaml;
  }
}

// Selections are compared to tell a change: parameters compare by what they hold, not by which
// parse made them.
TEST(Config, ParametersCompareByValue) {
  auto parse = [](const char* yaml) {
    auto cfg = parse_agent_config(yaml, "<test>");
    EXPECT_TRUE(cfg.ok()) << yaml;
    return cfg->instrumentations;
  };
  const char* t100 = "instrumentations: {nodejsEventLoop: {stallThresholdMs: 100}}";
  EXPECT_EQ(parse(t100), parse(t100));
  EXPECT_NE(parse(t100), parse("instrumentations: {nodejsEventLoop: {stallThresholdMs: 200}}"));
  EXPECT_NE(parse(t100), parse("instrumentations: {nodejsEventLoop: true}"));
  EXPECT_NE(parse(t100), parse("instrumentations: {nodejsEventLoop: false}"));
  EXPECT_EQ(parse("instrumentations: {nodejsEventLoop: true}"),
            parse("instrumentations: {nodejsEventLoop: {}}"));
  const char* cpu = "instrumentations: {cpu: {enabled: true, frequencyHz: 49}}";
  EXPECT_EQ(parse(cpu), parse(cpu));
  EXPECT_NE(parse(cpu), parse("instrumentations: {cpu: {enabled: true, frequencyHz: 50}}"));
}

TEST(Config, PoliciesMergeTheLowerStallThreshold) {
  const auto& kind = kind_of(Instrumentation::kNodejsEventLoop);
  auto parse = [&](const char* json) {
    auto p = kind.parse(nlohmann::json::parse(json), ParamsSource::kPolicy, "spec.x");
    EXPECT_TRUE(p.ok());
    return *p;
  };
  const auto none = parse("{}");
  const auto t200 = parse(R"({"stallThresholdMs": 200})");
  const auto t50 = parse(R"({"stallThresholdMs": 50})");
  EXPECT_EQ(kind.merge(t200, t50).as<NodejsParams>().stall_threshold_ms, 50u);
  EXPECT_EQ(kind.merge(t50, t200).as<NodejsParams>().stall_threshold_ms, 50u);
  EXPECT_EQ(kind.merge(none, t200).as<NodejsParams>().stall_threshold_ms, 200u);
  EXPECT_EQ(kind.merge(t200, none).as<NodejsParams>().stall_threshold_ms, 200u);
  EXPECT_EQ(kind.merge(none, none).as<NodejsParams>().stall_threshold_ms, 0u);
  auto bad = kind.parse(nlohmann::json::parse(R"({"stallThresholdMs": 9})"), ParamsSource::kPolicy,
                        "spec.instrumentations.nodejsEventLoop");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "spec.instrumentations.nodejsEventLoop.stallThresholdMs: must be 10..60000, got 9");
}

struct BadCase {
  const char* yaml;
  const char* error;
  friend void PrintTo(const BadCase& c, std::ostream* os) { *os << '"' << c.yaml << '"'; }
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameTheKeyAndTheProblem) {
  auto cfg = parse_agent_config(GetParam().yaml, "f.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    All, ConfigErrors,
    ::testing::Values(
        BadCase{"metricAddress: x", "f.yaml: metricAddress: unknown key"},
        BadCase{"instrumentations: {cpu: {frequencyHz: 5000}}",
                "f.yaml: instrumentations.cpu.frequencyHz: must be 1..999, got 5000"},
        BadCase{"instrumentations: {nodejsEventLoop: {stallThresholdMs: 5}}",
                "f.yaml: instrumentations.nodejsEventLoop.stallThresholdMs: must be 10..60000, got "
                "5"},
        BadCase{"instrumentations: {nodejsEventLoop: {stallThresholdMs: 60001}}",
                "f.yaml: instrumentations.nodejsEventLoop.stallThresholdMs: must be 10..60000, got "
                "60001"},
        BadCase{"instrumentations: {nodejsEventLoop: {stallThreshold: 100}}",
                "f.yaml: instrumentations.nodejsEventLoop.stallThreshold: unknown key"},
        BadCase{"instrumentations: {nodejsEventLoop: maybe}",
                "f.yaml: instrumentations.nodejsEventLoop: must be true, false or a mapping"},
        BadCase{"instrumentations: {goTLS: maybe}",
                "f.yaml: instrumentations.goTLS: must be true or false"},
        BadCase{"instrumentations: {cpu: true}", "f.yaml: instrumentations.cpu: must be a mapping"},
        BadCase{"instrumentations: {python: true}", "f.yaml: instrumentations.python: unknown key"},
        BadCase{"instrumentations: {cpu: {enabled: true, hz: 9}}",
                "f.yaml: instrumentations.cpu.hz: unknown key"},
        BadCase{"targets: [{containerId: xyz}]",
                "f.yaml: targets[0].containerId: must be 12 to 64 hex digits"},
        BadCase{"targets: [{}]", "f.yaml: targets[0]: needs exe or containerId"},
        BadCase{"logLevel: loud",
                "f.yaml: logLevel: must be debug, info, warn or error, got \"loud\""},
        BadCase{"metricsAddress: 9464", "f.yaml: metricsAddress: must be host:port, got \"9464\""},
        BadCase{"- a\n- b", "f.yaml: (top level): must be a mapping"},
        BadCase{"instrumentations: {cpu: {pyroscope: {url: 'http://p:4040'}}}",
                "f.yaml: instrumentations.cpu.pyroscope: pushes CPU profiles, but "
                "instrumentations.cpu.enabled is false"},
        BadCase{"instrumentations: {cpu: {enabled: true, pyroscope: {url: "
                "'https://p:4040'}}}",
                "f.yaml: instrumentations.cpu.pyroscope.url: must be an "
                "http://host[:port][/prefix] URL, got \"https://p:4040\""},
        BadCase{"instrumentations: {cpu: {enabled: true, pyroscope: {url: "
                "'http://p', intervalSeconds: 1}}}",
                "f.yaml: instrumentations.cpu.pyroscope.intervalSeconds: must be "
                "5..3600, got 1"},
        BadCase{"limits: {maxOverheadPercent: 0}",
                "f.yaml: limits.maxOverheadPercent: must be 0.01..100, got 0"},
        BadCase{"limits: {maxOverheadPercent: lots}",
                "f.yaml: limits.maxOverheadPercent: must be a number"},
        BadCase{"limits: {maxTargets: 3}", "f.yaml: limits.maxTargets: unknown key"},
        BadCase{"instrumentations: {goTLS: false}\nlimits: {maxOverheadPercent: 1}",
                "f.yaml: limits.maxOverheadPercent: budgets the probes of instrumentations "
                "goTLS, which the config does not enable"}));

TEST(Config, InvalidYamlIsAnError) {
  auto cfg = parse_agent_config("a: [1, 2", "f.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.error().message().find("f.yaml: invalid YAML"), std::string::npos);
}

TEST(Config, LoadFromFile) {
  char path[] = "/tmp/sonde-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "logLevel: warn\n";
  auto cfg = load_agent_config(path);
  std::remove(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message();
  EXPECT_EQ(cfg->log_level, "warn");
  auto missing = load_agent_config("/nonexistent/sonde.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(),
            "open config /nonexistent/sonde.yaml: No such file or directory");
}

}  // namespace
}  // namespace sonde
