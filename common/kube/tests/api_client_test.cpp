// ApiClient against the fake API server: CRUD, status subresource, merge patch, optimistic
// concurrency (409), retries with backoff on 429 (honouring a bounded Retry-After) and 500,
// the client-side rate limit, per-call timeouts and stop signals that cut hung calls short,
// and the fake's own strictness (field selectors, RBAC) that the rest of sonde relies on.
#include "common/kube/api_client.h"

#include <gtest/gtest.h>

#include <fstream>

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

TEST_F(ApiClientTest, ARetryAfterBeyondTheBoundIsCutToIt) {
  ApiClientOptions options = test_client_options(2);
  options.retry.max_retry_after = std::chrono::milliseconds(100);
  ApiClient client(fake_.client_config(), options);
  ASSERT_TRUE(client.create(kWidgets, "a", widget("a", "one", 1)).ok());
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets/one$"},
                           {"status", 429},
                           {"retry_after", 3600},
                           {"times", 1}});
  // An hour-long Retry-After honoured as asked would hang this test until ctest kills it.
  auto fetched = client.get(kWidgets, "a", "one");
  ASSERT_TRUE(fetched.ok()) << fetched.error().message();
  EXPECT_EQ(client.counters().retries.load(), 1u);
}

TEST_F(ApiClientTest, TheStopSignalEndsARetryAfterSleep) {
  StopSignal stop;
  ApiClientOptions options = test_client_options(3);
  options.retry.max_retry_after = std::chrono::hours(1);
  options.stop = &stop;
  ApiClient client(fake_.client_config(), options);
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets/one$"},
                           {"status", 429},
                           {"retry_after", 3600},
                           {"times", 1}});
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.stop();
  });
  auto fetched = client.get(kWidgets, "a", "one");
  stopper.join();
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.error().code(), 429) << "the last answer stands: " << fetched.error().message();
  EXPECT_EQ(requests_to(fake_, "/apis/test.sonde.dev/v1/namespaces/a/widgets/one", false).size(),
            1u)
      << "no retry after the stop";
}

TEST_F(ApiClientTest, RateLimitsRequestsAndTheStopSignalEndsTheWait) {
  StopSignal stop;
  ApiClientOptions options = test_client_options();
  options.qps = 0.5;  // one token every 2 s after the burst
  options.burst = 3;
  options.stop = &stop;
  ApiClient client(fake_.client_config(), options);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(client.get(kWidgets, "a", "x").ok());  // the burst
  EXPECT_EQ(client.counters().throttled.load(), 0u);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop.stop();
  });
  auto fourth = client.get(kWidgets, "a", "x");
  stopper.join();
  ASSERT_FALSE(fourth.ok());
  EXPECT_NE(fourth.error().message().find("rate limit"), std::string::npos)
      << fourth.error().message();
  EXPECT_EQ(client.counters().throttled.load(), 1u);
  EXPECT_EQ(requests_to(fake_, "/apis/test.sonde.dev/v1/namespaces/a/widgets/x", false).size(), 3u)
      << "the throttled request must not reach the server";
  EXPECT_EQ(client.counters().requests.load(), 3u);
}

TEST_F(ApiClientTest, ACallTimeoutCancelsAHungRequest) {
  ApiClient client(fake_.client_config(), test_client_options(3));
  ASSERT_TRUE(client.create(kWidgets, "a", widget("a", "one", 1)).ok());
  fake_.control("faults",
                {{"method", "GET"}, {"path", "/widgets/one$"}, {"hang", 60}, {"times", 10}});
  auto fetched = client.get(kWidgets, "a", "one", {.timeout = std::chrono::milliseconds(500)});
  ASSERT_FALSE(fetched.ok());
  EXPECT_NE(fetched.error().message().find("timed out"), std::string::npos)
      << fetched.error().message();
  EXPECT_LE(client.counters().requests.load(), 2u) << "no retries once the budget is spent";
  fake_.control("faults", {{"clear", true}});
}

TEST_F(ApiClientTest, FieldSelectorsAreThoseTheRealServerSupports) {
  ApiClient client(fake_.client_config(), test_client_options());
  EXPECT_TRUE(client.list(kPods, "", {.field_selector = "spec.nodeName=n1"}).ok());
  EXPECT_TRUE(
      client.list(kPods, "", {.field_selector = "status.phase!=Failed,metadata.name=x"}).ok());
  EXPECT_TRUE(client.list(kWidgets, "", {.field_selector = "metadata.namespace=a"}).ok());
  auto pods = client.list(kPods, "", {.field_selector = "spec.containers=x"});
  ASSERT_FALSE(pods.ok());
  EXPECT_EQ(pods.error().code(), 400);
  EXPECT_NE(pods.error().message().find("field label not supported: spec.containers"),
            std::string::npos)
      << pods.error().message();
  auto widgets = client.list(kWidgets, "", {.field_selector = "spec.value=1"});
  ASSERT_FALSE(widgets.ok());
  EXPECT_EQ(widgets.error().code(), 400) << "custom resources select on metadata only";
}

// RBAC in the fake: a service account may do what its bindings grant and nothing else.
TEST(FakeApiServerRbacTest, AnswersWhatTheBindingsDoNotGrantWith403) {
  const std::string rbac = ::testing::TempDir() + "rbac.yaml";
  std::ofstream(rbac) << R"(apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: ops}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: read-widgets}
rules:
  - {apiGroups: ["test.sonde.dev"], resources: ["widgets"], verbs: ["get", "list", "watch"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: read-widgets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: read-widgets}
subjects: [{kind: ServiceAccount, name: reader, namespace: ops}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: write-gadgets, namespace: ops}
rules:
  - {apiGroups: ["test.sonde.dev"], resources: ["gadgets"], verbs: ["create"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: write-gadgets, namespace: ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: write-gadgets}
subjects: [{kind: ServiceAccount, name: reader, namespace: ops}]
)";
  FakeApiServer fake(
      {.rbac_file = rbac,
       .identities = {"root-token=admin", "reader-token=system:serviceaccount:ops:reader"}});
  auto client_with = [&](const std::string& token) {
    ClientConfig config = fake.client_config();
    config.bearer_token = token;
    return std::make_unique<ApiClient>(config, test_client_options());
  };
  auto admin = client_with("root-token");
  auto reader = client_with("reader-token");
  ASSERT_TRUE(admin->create(kWidgets, "a", widget("a", "one", 1)).ok());

  EXPECT_TRUE(reader->get(kWidgets, "a", "one").ok());
  EXPECT_TRUE(reader->list(kWidgets, "", {}).ok());
  EXPECT_TRUE(reader->create(kGadgets, "ops", widget("ops", "g", 1)).ok()) << "its namespace";

  auto update = reader->replace(kWidgets, "a", "one", *reader->get(kWidgets, "a", "one"));
  ASSERT_FALSE(update.ok());
  EXPECT_EQ(update.error().code(), 403);
  EXPECT_NE(update.error().message().find(
                "Forbidden: widgets.test.sonde.dev \"one\" is forbidden: User "
                "\"system:serviceaccount:ops:reader\" cannot update resource \"widgets\" in API "
                "group \"test.sonde.dev\" in the namespace \"a\""),
            std::string::npos)
      << update.error().message();
  auto status = reader->replace(kWidgets, "a", "one", *reader->get(kWidgets, "a", "one"), "status");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("resource \"widgets/status\""), std::string::npos)
      << "the status subresource is its own resource: " << status.error().message();
  auto elsewhere = reader->create(kGadgets, "b", widget("b", "g", 1));
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.error().code(), 403) << "a RoleBinding grants only in its namespace";

  auto stranger = client_with("who-is-this");
  auto denied = stranger->get(kWidgets, "a", "one");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code(), 401);
}

}  // namespace
}  // namespace sonde::kube::testing
