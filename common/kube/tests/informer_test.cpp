// Informer against the fake API server: the cache and handlers see each change exactly once,
// including changes that happened while the watch was expired and were learned by a relist.
#include "common/kube/informer.h"

#include <gtest/gtest.h>

#include "common/kube/tests/fake_fixture.h"

namespace sonde::kube::testing {
namespace {

struct Seen {
  std::mutex mu;
  std::vector<std::string> events;  // "add a/one x5", "update a/one x7", "delete a/two"
  void push(std::string e) {
    std::lock_guard lock(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu);
    return std::exchange(events, {});
  }
  size_t size() {
    std::lock_guard lock(mu);
    return events.size();
  }
};

class InformerTest : public ::testing::Test {
 protected:
  InformerTest() : client_(fake_.client_config(), test_client_options()) {}

  void start(Transform transform = {}) {
    informer_ = std::make_unique<Informer>(client_, kWidgets, test_reflector_options(),
                                           std::move(transform));
    informer_->add_handlers({[this](const ObjectPtr& o) { seen_.push("add " + key_of(*o)); },
                             [this](const ObjectPtr& old_o, const ObjectPtr& new_o) {
                               seen_.push("update " + key_of(*new_o) + " " +
                                          std::to_string((*old_o)["spec"].value("value", -1)) +
                                          "->" +
                                          std::to_string((*new_o)["spec"].value("value", -1)));
                             },
                             [this](const ObjectPtr& o) { seen_.push("delete " + key_of(*o)); }});
    informer_->start();
    ASSERT_TRUE(informer_->wait_for_sync(std::chrono::seconds(10)));
  }

  FakeApiServer fake_;
  ApiClient client_;
  Seen seen_;
  std::unique_ptr<Informer> informer_;
};

TEST_F(InformerTest, CachesAndReportsChanges) {
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "one", 1)).ok());
  ASSERT_TRUE(client_.create(kWidgets, "b", widget("b", "two", 2)).ok());
  start();
  EXPECT_EQ(seen_.take(), (std::vector<std::string>{"add a/one", "add b/two"}));
  ASSERT_NE(informer_->get("a/one"), nullptr);
  EXPECT_EQ(informer_->list_namespace("a").size(), 1u);
  EXPECT_EQ(informer_->list().size(), 2u);

  ASSERT_TRUE(client_.merge_patch(kWidgets, "a", "one", {{"spec", {{"value", 5}}}}).ok());
  ASSERT_TRUE(client_.remove(kWidgets, "b", "two").ok());
  ASSERT_TRUE(eventually([&] { return seen_.size() == 2; }));
  EXPECT_EQ(seen_.take(), (std::vector<std::string>{"update a/one 1->5", "delete b/two"}));
  EXPECT_EQ((*informer_->get("a/one"))["spec"]["value"], 5);
  EXPECT_EQ(informer_->get("b/two"), nullptr);
}

TEST_F(InformerTest, ChangesMissedDuringAnExpiredWatchArriveOnceThroughTheRelist) {
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "keep", 1)).ok());
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "change", 1)).ok());
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "remove", 1)).ok());
  start();
  seen_.take();
  // Hold the relist back until the changes below are made, so they can only be learned from
  // the list, not from the watch.
  fake_.control("faults", {{"method", "GET"},
                           {"path", "/widgets$"},
                           {"watch", false},
                           {"status", 503},
                           {"times", 1000}});
  ASSERT_TRUE(eventually([&] { return fake_.control("watches")["watches"] == 1; }));
  fake_.control("watch_control", {{"action", "expire"}});
  ASSERT_TRUE(eventually([&] { return informer_->stats().list_errors >= 1; }));
  ASSERT_TRUE(client_.merge_patch(kWidgets, "a", "change", {{"spec", {{"value", 2}}}}).ok());
  ASSERT_TRUE(client_.remove(kWidgets, "a", "remove").ok());
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "new", 1)).ok());
  fake_.control("faults", {{"clear", true}});

  ASSERT_TRUE(eventually([&] { return seen_.size() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto events = seen_.take();
  std::sort(events.begin(), events.end());
  EXPECT_EQ(events,
            (std::vector<std::string>{"add a/new", "delete a/remove", "update a/change 1->2"}));
  EXPECT_EQ(informer_->stats().relists_after_gone, 1u);
  EXPECT_EQ(informer_->size(), 3u);
}

TEST_F(InformerTest, TransformTrimsStoredObjects) {
  ASSERT_TRUE(client_.create(kWidgets, "a", widget("a", "one", 1)).ok());
  start([](Json object) {
    object["spec"].erase("padding");
    return object;
  });
  auto cached = informer_->get("a/one");
  ASSERT_NE(cached, nullptr);
  EXPECT_FALSE((*cached)["spec"].contains("padding"));
  EXPECT_EQ((*cached)["spec"]["value"], 1);
}

}  // namespace
}  // namespace sonde::kube::testing
