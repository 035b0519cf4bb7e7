// Reflector semantics against the fake API server: list then watch from the list's
// resourceVersion, bookmarks, relist after 410 (list, continue token, ERROR event), resume
// after dropped connections, split events, backoff on 429/500 — and across all of them no
// event lost or applied twice.
#include "common/kube/reflector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/kube/tests/fake_fixture.h"

namespace sonde::kube::testing {
namespace {

const std::string kWidgetsPath = "/apis/test.sonde.dev/v1/widgets";

class ReflectorTest : public ::testing::Test {
 protected:
  ReflectorTest() : client_(fake_.client_config(), test_client_options()) {}
  ~ReflectorTest() override { stop_reflector(); }

  void start_reflector(ReflectorOptions options = test_reflector_options()) {
    reflector_ = std::make_unique<Reflector>(client_, kWidgets, options, sink_);
    thread_ = std::thread([this] { reflector_->run(stop_); });
    ASSERT_TRUE(eventually([&] { return sink_.replaces() >= 1; }));
    ASSERT_TRUE(eventually([&] { return fake_.control("watches")["watches"] == 1; }))
        << "reflector did not open its watch";
  }
  void stop_reflector() {
    stop_.stop();
    if (thread_.joinable()) thread_.join();
  }
  Json create(const std::string& ns, const std::string& name, int value = 1) {
    auto created = client_.create(kWidgets, ns, widget(ns, name, value));
    EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error().message());
    return created.ok() ? *created : Json();
  }
  Json set_value(const std::string& ns, const std::string& name, int value) {
    auto patched = client_.merge_patch(kWidgets, ns, name, {{"spec", {{"value", value}}}});
    EXPECT_TRUE(patched.ok()) << (patched.ok() ? "" : patched.error().message());
    return patched.ok() ? *patched : Json();
  }
  // The sink converges on exactly the server's state.
  void expect_converged() {
    EXPECT_TRUE(eventually([&] { return sink_.versions() == server_versions(client_, kWidgets); }))
        << "sink never matched the server";
    EXPECT_EQ(sink_.duplicates(), 0) << "an object version was applied twice";
  }

  FakeApiServer fake_;
  ApiClient client_;
  RecordingSink sink_;
  StopSignal stop_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

TEST_F(ReflectorTest, ListsThenWatchesFromTheListResourceVersion) {
  create("a", "one");
  create("b", "two");
  start_reflector();
  EXPECT_TRUE(sink_.has("a/one"));
  EXPECT_TRUE(sink_.has("b/two"));

  const auto lists = requests_to(fake_, kWidgetsPath, false);
  const auto watches = requests_to(fake_, kWidgetsPath, true);
  ASSERT_EQ(lists.size(), 1u);
  ASSERT_EQ(watches.size(), 1u);
  EXPECT_EQ(lists[0]["query"].value("resourceVersion", ""), "0")
      << "lists come from the watch cache, not etcd";
  const std::string list_rv = watches[0]["query"]["resourceVersion"];
  EXPECT_EQ(list_rv, server_versions(client_, kWidgets)["b/two"]);
  EXPECT_EQ(watches[0]["query"]["allowWatchBookmarks"], "true");
  const int timeout = std::stoi(watches[0]["query"]["timeoutSeconds"].get<std::string>());
  EXPECT_GE(timeout, 30);
  EXPECT_LT(timeout, 60);

  const Json three = create("a", "three");
  set_value("a", "one", 2);
  ASSERT_TRUE(client_.remove(kWidgets, "b", "two").ok());
  expect_converged();
  EXPECT_EQ(sink_.times_applied("a/three", resource_version_of(three)), 1);
  EXPECT_EQ(sink_.applies(), 3);
  EXPECT_EQ(reflector_->stats().lists, 1u);
}

TEST_F(ReflectorTest, PagesThroughLargeListsWhenTheServerHasNoWatchCache) {
  fake_.control("config", {{"watch_cache", false}});
  for (int i = 0; i < 7; ++i) create("a", "w" + std::to_string(i));
  ReflectorOptions options = test_reflector_options();
  options.page_size = 3;
  start_reflector(options);
  EXPECT_EQ(sink_.versions().size(), 7u);
  const auto lists = requests_to(fake_, kWidgetsPath, false);
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[0]["query"]["limit"], "3");
  EXPECT_EQ(lists[0]["query"]["resourceVersion"], "0");
  EXPECT_TRUE(lists[1]["query"].contains("continue"));
  EXPECT_FALSE(lists[1]["query"].contains("resourceVersion")) << "the token carries it";
  expect_converged();
}

TEST_F(ReflectorTest, TheWatchCacheAnswersAPagedListInOneResponse) {
  for (int i = 0; i < 7; ++i) create("a", "w" + std::to_string(i));
  ReflectorOptions options = test_reflector_options();
  options.page_size = 3;
  start_reflector(options);
  EXPECT_EQ(sink_.versions().size(), 7u);
  EXPECT_EQ(requests_to(fake_, kWidgetsPath, false).size(), 1u);
  expect_converged();
}

TEST_F(ReflectorTest, RelistsAfter410OnTheList) {
  create("a", "one");
  fake_.control(
      "faults",
      {{"method", "GET"}, {"path", "/widgets$"}, {"watch", false}, {"status", 410}, {"times", 1}});
  start_reflector();
  EXPECT_EQ(reflector_->stats().list_errors, 1u);
  EXPECT_EQ(reflector_->stats().lists, 1u);
  EXPECT_EQ(requests_to(fake_, kWidgetsPath, false).size(), 2u);
  create("a", "two");
  expect_converged();
}

TEST_F(ReflectorTest, RestartsTheListUnpagedWhenTheContinueTokenExpires) {
  fake_.control("config", {{"watch_cache", false}});
  for (int i = 0; i < 5; ++i) create("a", "w" + std::to_string(i));
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets$"},
                           {"query", "continue="},
                           {"status", 410},
                           {"times", 1}});
  ReflectorOptions options = test_reflector_options();
  options.page_size = 2;
  start_reflector(options);
  const auto lists = requests_to(fake_, kWidgetsPath, false);
  ASSERT_EQ(lists.size(), 3u);  // page 1, expired page 2, one unpaged list
  EXPECT_FALSE(lists[2]["query"].contains("limit"));
  EXPECT_EQ(sink_.replaces(), 1) << "a partial list must not reach the sink";
  expect_converged();
}

TEST_F(ReflectorTest, RelistsAfterAn410ErrorEventInsideTheWatch) {
  create("a", "one");
  create("a", "two");
  start_reflector();
  set_value("a", "one", 5);
  ASSERT_TRUE(eventually([&] { return sink_.applies() == 1; }));

  fake_.control("watch_control", {{"action", "expire"}});
  ASSERT_TRUE(eventually([&] { return reflector_->stats().relists_after_gone == 1; }));
  ASSERT_TRUE(eventually([&] { return sink_.replaces() == 2; }));
  // The relist comes from the watch cache too, and the new watch starts from its version.
  const auto lists = requests_to(fake_, kWidgetsPath, false);
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[1]["query"].value("resourceVersion", ""), "0");
  set_value("a", "two", 7);
  create("a", "three");
  expect_converged();
  EXPECT_EQ(reflector_->stats().lists, 2u);
}

TEST_F(ReflectorTest, RelistsWhenResumingFromACompactedVersion) {
  create("a", "one");
  // Every watch after the first is refused with an HTTP 410, as an API server does when the
  // requested version is older than its window.
  start_reflector();
  fake_.control(
      "faults",
      {{"method", "GET"}, {"path", "/widgets$"}, {"watch", true}, {"status", 410}, {"times", 1}});
  fake_.control("watch_control", {{"action", "drop"}});
  ASSERT_TRUE(eventually([&] { return reflector_->stats().relists_after_gone == 1; }));
  create("a", "two");
  expect_converged();
  EXPECT_EQ(reflector_->stats().lists, 2u);
}

TEST_F(ReflectorTest, ResumesFromTheLastBookmarkAfterADroppedConnection) {
  create("a", "one");
  start_reflector();
  // Writes to another resource move the global resourceVersion past anything this watch saw;
  // only a bookmark tells the reflector about it.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client_.create(kGadgets, "a", widget("a", "g" + std::to_string(i), i)).ok());
  }
  fake_.control("watch_control", {{"action", "bookmark"}});
  ASSERT_TRUE(eventually([&] { return reflector_->stats().bookmarks == 1; }));
  const std::string bookmark_rv = reflector_->last_resource_version();
  const auto first_watch = requests_to(fake_, kWidgetsPath, true).at(0);
  EXPECT_NE(bookmark_rv, first_watch["query"]["resourceVersion"]);

  // History before the bookmark is gone: resuming from anything older would cost a relist.
  fake_.control("compact");
  fake_.control("watch_control", {{"action", "drop"}});
  ASSERT_TRUE(eventually([&] { return requests_to(fake_, kWidgetsPath, true).size() == 2; }));
  EXPECT_EQ(requests_to(fake_, kWidgetsPath, true)[1]["query"]["resourceVersion"], bookmark_rv);
  const Json two = create("a", "two");
  expect_converged();
  EXPECT_EQ(reflector_->stats().lists, 1u) << "resuming from the bookmark must not relist";
  EXPECT_EQ(reflector_->stats().relists_after_gone, 0u);
  EXPECT_EQ(sink_.times_applied("a/two", resource_version_of(two)), 1);
}

TEST_F(ReflectorTest, AnEventCutOffByADroppedConnectionIsDeliveredOnceAfterResuming) {
  create("a", "one");
  start_reflector();
  fake_.control("watch_control", {{"action", "drop_partial"}});
  const Json two = create("a", "two");
  expect_converged();
  EXPECT_EQ(sink_.times_applied("a/two", resource_version_of(two)), 1);
  EXPECT_EQ(reflector_->stats().lists, 1u);
  EXPECT_GE(reflector_->stats().watch_errors, 1u);
  const auto watches = requests_to(fake_, kWidgetsPath, true);
  ASSERT_GE(watches.size(), 2u);
  EXPECT_EQ(watches[1]["query"]["resourceVersion"], watches[0]["query"]["resourceVersion"])
      << "the resumed watch must start before the lost event";
}

TEST_F(ReflectorTest, ReassemblesEventsSplitAcrossChunks) {
  fake_.control("config", {{"split_events", true}});
  create("a", "one");
  start_reflector();
  for (int i = 0; i < 10; ++i) create("a", "split" + std::to_string(i), i);
  set_value("a", "one", 42);
  expect_converged();
  EXPECT_EQ(sink_.applies(), 11);
  EXPECT_EQ(reflector_->stats().watch_errors, 0u);
}

TEST_F(ReflectorTest, BacksOffOnThrottledAndFailingWatches) {
  start_reflector();
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets$"},
                           {"watch", true},
                           {"status", 429},
                           {"retry_after", 0},
                           {"times", 2}});
  fake_.control(
      "faults",
      {{"method", "GET"}, {"path", "/widgets$"}, {"watch", true}, {"status", 500}, {"times", 1}});
  fake_.clear_requests();
  fake_.control("watch_control", {{"action", "drop"}});
  ASSERT_TRUE(eventually([&] { return requests_to(fake_, kWidgetsPath, true).size() == 4; }));
  const Json one = create("a", "one");
  expect_converged();
  const auto watches = requests_to(fake_, kWidgetsPath, true);
  ASSERT_EQ(watches.size(), 4u);  // 429, 429, 500, then a watch that streams
  EXPECT_EQ(watches[0]["status"], 429);
  EXPECT_EQ(watches[2]["status"], 500);
  // Backoff 100 ms doubling, jitter up to +50%: gaps of at least 100, 200 and 400 ms.
  const double t0 = watches[0]["time"], t1 = watches[1]["time"], t2 = watches[2]["time"],
               t3 = watches[3]["time"];
  EXPECT_GE(t1 - t0, 0.095);
  EXPECT_GE(t2 - t1, 0.19);
  EXPECT_GE(t3 - t2, 0.38);
  EXPECT_EQ(sink_.times_applied("a/one", resource_version_of(one)), 1);
  EXPECT_EQ(reflector_->stats().lists, 1u);
}

TEST_F(ReflectorTest, WatchTimeoutEndsTheStreamAndTheReflectorResumes) {
  ReflectorOptions options = test_reflector_options();
  options.min_watch_timeout = std::chrono::seconds(1);
  create("a", "one");
  start_reflector(options);
  ASSERT_TRUE(eventually([&] { return requests_to(fake_, kWidgetsPath, true).size() >= 2; },
                         std::chrono::seconds(5)));
  const Json two = create("a", "two");
  expect_converged();
  EXPECT_EQ(reflector_->stats().lists, 1u);
  EXPECT_EQ(reflector_->stats().watch_errors, 0u);
}

// Everything at once: a writer keeps changing objects while the server splits events, sends
// bookmarks, drops connections (cleanly and mid-event), expires the watch and throttles.
TEST_F(ReflectorTest, NoEventLostOrAppliedTwiceUnderEveryFaultTogether) {
  fake_.control("config", {{"split_events", true}, {"bookmark_interval", 0.05}});
  for (int i = 0; i < 5; ++i) create("ns" + std::to_string(i % 2), "w" + std::to_string(i));
  ReflectorOptions options = test_reflector_options();
  options.backoff = {std::chrono::milliseconds(20), std::chrono::milliseconds(200), 2.0, 0.5};
  start_reflector(options);

  std::atomic<bool> writing{true};
  std::thread writer([&] {
    ApiClient writer_client(fake_.client_config(), test_client_options(5));
    int n = 0;
    while (writing.load()) {
      const std::string name = "w" + std::to_string(n % 8);
      const std::string ns = "ns" + std::to_string(n % 2);
      if (n % 5 == 4) {
        (void)writer_client.remove(kWidgets, ns, name);
      } else if (!writer_client.merge_patch(kWidgets, ns, name, {{"spec", {{"value", n}}}}).ok()) {
        (void)writer_client.create(kWidgets, ns, widget(ns, name, n));
      }
      ++n;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  });
  const std::vector<Json> faults = {
      {{"action", "drop"}}, {{"action", "drop_partial"}}, {{"action", "expire"}},
      {{"action", "drop"}}, {{"action", "drop_partial"}}, {{"action", "expire"}},
  };
  for (const auto& fault : faults) {
    // Let events flow for a while on an open watch, break it, and wait for the reflector to
    // come back on a new watch before the next fault.
    const size_t watches_before = requests_to(fake_, kWidgetsPath, true).size();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    fake_.control("watch_control", fault);
    ASSERT_TRUE(eventually([&] {
      return requests_to(fake_, kWidgetsPath, true).size() > watches_before &&
             fake_.control("watches")["watches"] == 1;
    })) << "the reflector did not come back after "
        << fault.dump();
    if (fault["action"] == "drop") {
      fake_.control("faults", {{"method", "GET"},
                               {"path", "/widgets$"},
                               {"watch", true},
                               {"status", 429},
                               {"retry_after", 0},
                               {"times", 1}});
      fake_.control("faults", {{"method", "GET"},
                               {"path", "/widgets$"},
                               {"watch", true},
                               {"status", 500},
                               {"times", 1}});
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  writing.store(false);
  writer.join();
  expect_converged();
  const ReflectorStats stats = reflector_->stats();
  EXPECT_EQ(stats.relists_after_gone, 2u);
  EXPECT_GE(stats.watch_errors, 4u);
  EXPECT_GT(stats.events, 50u);
  EXPECT_GT(stats.bookmarks, 0u);
}

// A connection that goes silent — no event, no bookmark, no FIN, as with a dead peer or a hung
// server — is abandoned after the idle timeout and the watch resumed. The default timeout is
// under a minute; the run uses 2 s so that the suite does not wait the default out.
TEST_F(ReflectorTest, ASilentWatchIsReplacedAfterTheIdleTimeout) {
  EXPECT_LT(ReflectorOptions{}.watch_idle_timeout, std::chrono::minutes(1));
  create("a", "one");
  ReflectorOptions options = test_reflector_options();
  options.watch_idle_timeout = std::chrono::seconds(2);
  options.min_watch_timeout = ReflectorOptions{}.min_watch_timeout;
  start_reflector(options);
  fake_.control("watch_control", {{"action", "silence"}});
  const auto silenced_at = std::chrono::steady_clock::now();
  const Json two = create("a", "two");
  ASSERT_TRUE(eventually([&] { return sink_.has("a/two"); }, std::chrono::seconds(20)))
      << "the silent watch was not replaced";
  EXPECT_GE(std::chrono::steady_clock::now() - silenced_at, std::chrono::milliseconds(1900))
      << "replaced before the idle timeout: the event did not come through the silent watch";
  EXPECT_EQ(reflector_->stats().watch_idle_restarts, 1u);
  EXPECT_EQ(reflector_->stats().lists, 1u) << "resumed from its resourceVersion, not relisted";
  const auto watches = requests_to(fake_, kWidgetsPath, true);
  ASSERT_EQ(watches.size(), 2u);
  EXPECT_EQ(watches[1]["query"]["resourceVersion"], watches[0]["query"]["resourceVersion"]);
  EXPECT_EQ(sink_.times_applied("a/two", resource_version_of(two)), 1);
  expect_converged();
}

// Stopping ends a list the server never answers at once, not after the request timeout (here
// 30 s) times the client's retries: a shutdown during an API outage is not held up by a relist.
TEST(ReflectorStop, EndsAListTheServerHangs) {
  FakeApiServer fake;
  ApiClientOptions options = test_client_options(/*attempts=*/5);
  options.request_timeout = std::chrono::seconds(30);
  ApiClient client(fake.client_config(), options);
  fake.control(
      "faults",
      {{"method", "GET"}, {"path", kWidgetsPath}, {"watch", false}, {"hang", 600}, {"times", 100}});
  RecordingSink sink;
  Reflector reflector(client, kWidgets, test_reflector_options(), sink);
  StopSignal stop;
  std::thread thread([&] { reflector.run(stop); });
  ASSERT_TRUE(eventually([&] { return requests_to(fake, kWidgetsPath, false).size() == 1; }))
      << "the list was not sent";
  const auto stopped_at = std::chrono::steady_clock::now();
  stop.stop();
  thread.join();
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  EXPECT_LT(took, std::chrono::seconds(5))
      << "the hung list held the stop for " << std::chrono::duration<double>(took).count() << " s";
  EXPECT_EQ(sink.replaces(), 0);
  EXPECT_EQ(requests_to(fake, kWidgetsPath, false).size(), 1u) << "retried after the stop";
  fake.control("faults", {{"clear", true}});
}

}  // namespace
}  // namespace sonde::kube::testing
