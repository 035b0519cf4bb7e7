// ApiClient against the fake API server: CRUD, status subresource, merge patch, optimistic
// concurrency (409), and retries with backoff on 429 (honouring Retry-After) and 500.
#include "common/kube/api_client.h"

#include <gtest/gtest.h>

#include "common/kube/tests/fake_fixture.h"

namespace sonde::kube::testing {
namespace {

class ApiClientTest : public ::testing::Test {
 protected:
  FakeApiServer fake_;
};

TEST_F(ApiClientTest, CreatesReadsUpdatesPatchesAndDeletes) {
  ApiClient client(fake_.client_config(), test_client_options());
  auto created = client.create(kWidgets, "a", widget("a", "one", 1));
  ASSERT_TRUE(created.ok()) << created.error().message();
  EXPECT_FALSE(resource_version_of(*created).empty());
  EXPECT_EQ(generation_of(*created), 1);

  auto again = client.create(kWidgets, "a", widget("a", "one", 1));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(is_conflict(again.error()));

  auto patched = client.merge_patch(kWidgets, "a", "one", {{"spec", {{"value", 2}}}});
  ASSERT_TRUE(patched.ok()) << patched.error().message();
  EXPECT_EQ((*patched)["spec"]["value"], 2);
  EXPECT_EQ((*patched)["spec"]["padding"], std::string(300, 'p')) << "merge keeps other fields";

  auto fetched = client.get(kWidgets, "a", "one");
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(resource_version_of(*fetched), resource_version_of(*patched));

  ASSERT_TRUE(client.remove(kWidgets, "a", "one").ok());
  auto gone = client.get(kWidgets, "a", "one");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(is_not_found(gone.error()));
  EXPECT_NE(gone.error().message().find("NotFound"), std::string::npos);
}

TEST_F(ApiClientTest, StaleResourceVersionIsAConflict) {
  ApiClient client(fake_.client_config(), test_client_options());
  auto created = client.create(kWidgets, "a", widget("a", "one", 1));
  ASSERT_TRUE(created.ok());
  Json first = *created;
  first["spec"]["value"] = 10;
  ASSERT_TRUE(client.replace(kWidgets, "a", "one", first).ok());
  Json stale = *created;  // still carries the original resourceVersion
  stale["spec"]["value"] = 20;
  auto conflict = client.replace(kWidgets, "a", "one", stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_TRUE(is_conflict(conflict.error()));
  EXPECT_EQ((*client.get(kWidgets, "a", "one"))["spec"]["value"], 10);
}

TEST_F(ApiClientTest, StatusSubresourceWritesOnlyStatus) {
  fake_.control("config", {{"status_subresources", {"widgets"}}});
  ApiClient client(fake_.client_config(), test_client_options());
  ASSERT_TRUE(client.create(kWidgets, "a", widget("a", "one", 1)).ok());
  Json object = *client.get(kWidgets, "a", "one");
  object["spec"]["value"] = 99;
  object["status"] = {{"ready", true}};
  auto written = client.replace(kWidgets, "a", "one", object, "status");
  ASSERT_TRUE(written.ok()) << written.error().message();
  EXPECT_EQ((*written)["status"]["ready"], true);
  EXPECT_EQ((*written)["spec"]["value"], 1) << "a /status write must not change the spec";
  EXPECT_EQ(generation_of(*written), 1);

  auto spec_write = client.merge_patch(kWidgets, "a", "one",
                                       {{"spec", {{"value", 3}}}, {"status", {{"ready", false}}}});
  ASSERT_TRUE(spec_write.ok());
  EXPECT_EQ((*spec_write)["status"]["ready"], true) << "a main-resource write ignores status";
  EXPECT_EQ(generation_of(*spec_write), 2) << "a spec change bumps the generation";
}

TEST_F(ApiClientTest, RetriesThrottledRequestsHonouringRetryAfter) {
  ApiClient client(fake_.client_config(), test_client_options(3));
  ASSERT_TRUE(client.create(kWidgets, "a", widget("a", "one", 1)).ok());
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets/one$"},
                           {"status", 429},
                           {"retry_after", 1},
                           {"times", 1}});
  const auto start = std::chrono::steady_clock::now();
  auto fetched = client.get(kWidgets, "a", "one");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(fetched.ok()) << fetched.error().message();
  EXPECT_GE(took, std::chrono::milliseconds(950)) << "Retry-After: 1 must be honoured";
  EXPECT_EQ(client.counters().retries.load(), 1u);
}

TEST_F(ApiClientTest, RetriesServerErrorsWithBackoffAndGivesUp) {
  ApiClient client(fake_.client_config(), test_client_options(3));
  ASSERT_TRUE(client.create(kWidgets, "a", widget("a", "one", 1)).ok());
  fake_.control("faults",
                {{"method", "GET"}, {"path", "/widgets/one$"}, {"status", 500}, {"times", 2}});
  auto fetched = client.get(kWidgets, "a", "one");
  ASSERT_TRUE(fetched.ok()) << fetched.error().message();
  auto log = fake_.requests();
  std::vector<double> times;
  for (const auto& r : log) {
    if (r["path"] == "/apis/test.sonde.dev/v1/namespaces/a/widgets/one") times.push_back(r["time"]);
  }
  ASSERT_EQ(times.size(), 3u);
  EXPECT_GE(times[1] - times[0], 0.045);  // backoff 50 ms, then 100 ms
  EXPECT_GE(times[2] - times[1], 0.095);

  fake_.control("faults",
                {{"method", "GET"}, {"path", "/widgets/one$"}, {"status", 503}, {"times", 5}});
  auto failed = client.get(kWidgets, "a", "one");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code(), 503);
}

TEST_F(ApiClientTest, DoesNotRetryClientErrors) {
  ApiClient client(fake_.client_config(), test_client_options(5));
  auto missing = client.get(kWidgets, "a", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(is_not_found(missing.error()));
  EXPECT_EQ(client.counters().retries.load(), 0u);
}

TEST_F(ApiClientTest, TransportFailuresAreCodeZero) {
  ClientConfig config;
  config.server = "http://127.0.0.1:1";
  ApiClient client(config, test_client_options(1));
  auto result = client.get(kWidgets, "a", "x");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(is_transport(result.error()));
}

TEST_F(ApiClientTest, WatchStopsPromptlyOnStopSignal) {
  ApiClient client(fake_.client_config(), test_client_options());
  StopSignal stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop.stop();
  });
  const auto start = std::chrono::steady_clock::now();
  WatchOptions options;
  options.timeout_seconds = 60;
  Status status = client.watch(
      kWidgets, "", options, [](WatchEvent) { return true; }, &stop);
  stopper.join();
  EXPECT_TRUE(status.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace sonde::kube::testing
