// Label values from tenants: every one that reaches /metrics is valid UTF-8 and bounded, checked
// against promtool (Prometheus's own parser), which rejects a scrape holding one invalid value.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "agent/tests/http_get.h"
#include "common/text.h"

namespace sonde::agent {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

struct Promtool {
  int status = -1;
  std::string output;
};

// `promtool check metrics` on `text`: its exit status (0: the scrape parses and lints clean).
Promtool promtool_check(const std::string& text) {
  char path[] = "/tmp/sonde-label-test-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Promtool r;
  std::string command = std::string("promtool check metrics <") + path + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.output.append(buf.data(), n);
  int status = pclose(p);
  unlink(path);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(LabelValue, KeepsValidValuesWithinTheBound) {
  for (const std::string& v : std::vector<std::string>{"", "go1.19.8", "caf\xC3\xA9",
                                                       "a \"quoted\" \\ value\nwith a newline",
                                                       std::string(kMaxLabelValueBytes, 'x')}) {
    EXPECT_EQ(label_value(v), v);
  }
}

TEST(LabelValue, ReplacesInvalidBytes) {
  EXPECT_EQ(label_value("go1.19.\xFF"), "go1.19." + kFffd);
  EXPECT_EQ(label_value("\xC3"), kFffd);
}

TEST(LabelValue, CutsLongValuesAndKeepsThemApart) {
  std::string a(4096, 'a');
  std::string b = a;
  b.back() = 'b';
  std::string la = label_value(a);
  std::string lb = label_value(b);
  EXPECT_LE(la.size(), kMaxLabelValueBytes);
  EXPECT_LE(lb.size(), kMaxLabelValueBytes);
  EXPECT_NE(la, lb) << "values that differ only past the cut must stay two series";
  EXPECT_TRUE(la.starts_with(std::string(900, 'a')));
  EXPECT_EQ(label_value(a), la) << "the same value gives the same label on every scrape";
  // Cut at a character: a value of 2-byte characters never ends in half of one.
  std::string accents;
  for (int i = 0; i < 1000; ++i) accents += "\xC3\xA9";
  std::string cut = label_value(accents);
  EXPECT_LE(cut.size(), kMaxLabelValueBytes);
  EXPECT_TRUE(is_valid_utf8(cut));
  // Invalid bytes grow 1 → 3 bytes: a value within the bound can leave it once replaced.
  std::string ff(kMaxLabelValueBytes, '\xFF');
  EXPECT_LE(label_value(ff).size(), kMaxLabelValueBytes);
  EXPECT_TRUE(is_valid_utf8(label_value(ff)));
}

// What the issue tried: a Go binary's build-info version "go1.19.\xff" in a `reason` label, and
// the other tenant-chosen shapes, through the real server: promtool accepts the scrape.
TEST(LabelValue, EveryTenantValueServedOnMetricsPassesPromtool) {
  auto server = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.error().message();
  const std::string long_path = "/" + std::string(5000, 'p') + "\xFF";
  (*server)->add([&] {
    auto binaries = gauge_family("test_gotls_binaries", "binaries");
    add_sample(binaries, {{"binary", "/srv/\xFF\xFEgotls"}, {"reason", "go1.19.\xFF"}}, 1);
    add_sample(binaries, {{"binary", long_path}, {"reason", "\xC0\xAF\xED\xA0\x80"}}, 1);
    auto durations = histogram_family("test_duration_seconds", "durations");
    std::array<double, 1> bounds{0.1};
    std::array<uint64_t, 2> counts{1, 2};
    add_histogram(durations, {{"container", "c\xF4\x90\x80\x80"}}, bounds, counts, 3.5);
    return std::vector{std::move(binaries), std::move(durations)};
  });
  auto scrape = sonde::testing::http_get((*server)->port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);
  EXPECT_TRUE(is_valid_utf8(scrape.body));
  EXPECT_NE(scrape.body.find("reason=\"go1.19." + kFffd + "\""), std::string::npos) << scrape.body;
  auto check = promtool_check(scrape.body);
  EXPECT_EQ(check.status, 0) << check.output << "\n" << scrape.body;
  for (size_t line = 0, end; line < scrape.body.size(); line = end + 1) {
    end = scrape.body.find('\n', line);
    EXPECT_LT(end - line, 2 * kMaxLabelValueBytes + 200) << "a label value past the bound";
  }
}

// The check above can fail: the same scrape without the sanitizer is what promtool refuses.
TEST(LabelValue, PromtoolRefusesTheRawValue) {
  auto check = promtool_check(
      "# HELP test_gotls_binaries binaries\n# TYPE test_gotls_binaries gauge\n"
      "test_gotls_binaries{reason=\"go1.19.\xFF\"} 1\n");
  EXPECT_EQ(check.status, 1) << check.output;
  EXPECT_NE(check.output.find("invalid label value"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace sonde::agent
