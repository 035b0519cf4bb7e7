// RouteAccess against a scripted reviewer: who gets a profile, what is cached and for how long,
// and what a flood of unknown tokens or an unreachable API server costs.
#include "agent/cluster/route_access.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "common/testing/manual_clock.h"

namespace sonde::agent {
namespace {

using ::sonde::testing::ManualClock;

// Tokens "alice" (may read namespace "a" and /metrics), "admin" (everything); any other is not
// authenticated.
class ScriptedReviewer final : public AccessReviewer {
 public:
  Result<TokenVerdict> review_token(const std::string& token,
                                    const std::string& audience) override {
    wait_if_held();
    ++token_reviews;
    last_audience = audience;
    if (down) return Error("connect: connection refused");
    if (token == "alice" || token == "admin") return TokenVerdict{User{token, "", {}}, ""};
    return TokenVerdict{std::nullopt, "token lookup failed"};
  }
  // alice may also get /metrics; nobody any other path.
  Result<bool> may(const User& user, const Permission& p) override {
    ++access_reviews;
    if (down) return Error("connect: connection refused");
    if (!p.path.empty())
      return user.name == "admin" || (user.name == "alice" && p.path == "/metrics");
    return user.name == "admin" || (user.name == "alice" && p.ns == "a");
  }
  void wait_if_held() {
    std::unique_lock lock(mu);
    ++waiting;
    changed.notify_all();
    changed.wait(lock, [&] { return !held; });
    --waiting;
  }

  std::atomic<int> token_reviews = 0, access_reviews = 0;
  std::string last_audience;
  bool down = false;
  std::mutex mu;
  std::condition_variable changed;
  bool held = false;
  int waiting = 0;
};

HttpRequest profile(const std::string& token, const std::string& ns = "") {
  HttpRequest r{"GET", "/debug/pprof/profile", {}, token.empty() ? "" : "Bearer " + token};
  if (!ns.empty()) r.query["namespace"] = ns;
  return r;
}

int status_of(const std::optional<HttpResponse>& r) {
  return r ? r->status : 200;
}

TEST(RouteAccessTest, ATokenReadsTheNamespacesItsUserMayAndNothingElse) {
  ScriptedReviewer reviewer;
  ::sonde::testing::ManualClock clock;
  RouteAccess access(reviewer, {.audience = "sonde"}, clock);
  EXPECT_EQ(status_of(access.check(profile("alice", "a"))), 200);
  EXPECT_EQ(reviewer.last_audience, "sonde");
  auto other = access.check(profile("alice", "b"));
  ASSERT_EQ(status_of(other), 403);
  EXPECT_NE(other->body.find("namespace \"b\""), std::string::npos) << other->body;
  EXPECT_EQ(status_of(access.check(profile("alice"))), 403);  // every namespace
  EXPECT_EQ(status_of(access.check(profile("admin"))), 200);
  auto none = access.check(profile(""));
  ASSERT_EQ(status_of(none), 401);
  EXPECT_NE(none->body.find("bearer token is required"), std::string::npos);
  HttpRequest basic = profile("");
  basic.authorization = "Basic YWxpY2U6eA==";
  EXPECT_EQ(status_of(access.check(basic)), 401);
  auto forged = access.check(profile("forged"));
  ASSERT_EQ(status_of(forged), 401);
  EXPECT_NE(forged->body.find("token lookup failed"), std::string::npos) << forged->body;
  const auto st = access.stats();
  EXPECT_EQ(st.allowed, 2u);
  EXPECT_EQ(st.forbidden, 2u);
  EXPECT_EQ(st.unauthenticated, 3u);
}

TEST(RouteAccessTest, DecisionsAreCachedForTheirTtlAndBounded) {
  ScriptedReviewer reviewer;
  ::sonde::testing::ManualClock clock;
  RouteAccess access(reviewer, {.ttl_ns = 1000, .max_entries = 2}, clock);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(status_of(access.check(profile("alice", "a"))), 200);
    EXPECT_EQ(status_of(access.check(profile("forged"))), 401);
  }
  EXPECT_EQ(reviewer.token_reviews, 2);  // one per token, then from the cache
  clock.advance_ns(1000);                // expired
  EXPECT_EQ(status_of(access.check(profile("alice", "a"))), 200);
  EXPECT_EQ(reviewer.token_reviews, 3);
  // At most two decisions: a third pushes out the oldest ("forged").
  EXPECT_EQ(status_of(access.check(profile("admin"))), 200);
  EXPECT_EQ(reviewer.token_reviews, 4);
  EXPECT_EQ(status_of(access.check(profile("forged"))), 401);
  EXPECT_EQ(reviewer.token_reviews, 5);
}

TEST(RouteAccessTest, AnApiServerThatCannotAnswerIsA503NeverAnOpenDoorAndIsNotCached) {
  ScriptedReviewer reviewer;
  reviewer.down = true;
  ::sonde::testing::ManualClock clock;
  RouteAccess access(reviewer, {}, clock);
  auto r = access.check(profile("admin"));
  ASSERT_EQ(status_of(r), 503);
  EXPECT_NE(r->body.find("connection refused"), std::string::npos) << r->body;
  reviewer.down = false;
  EXPECT_EQ(status_of(access.check(profile("admin"))), 200);
  EXPECT_EQ(access.stats().unavailable, 1u);
}

TEST(RouteAccessTest, AFloodOfUnknownTokensCostsAtMostKMaxInFlightReviewsAtATime) {
  ScriptedReviewer reviewer;
  reviewer.held = true;
  ::sonde::testing::ManualClock clock;
  RouteAccess access(reviewer, {}, clock);
  std::vector<std::thread> reviewing;
  std::atomic<int> unauthenticated = 0;
  for (int i = 0; i < RouteAccess::kMaxInFlight; ++i) {
    reviewing.emplace_back([&, i] {
      if (status_of(access.check(profile("bad-" + std::to_string(i)))) == 401) ++unauthenticated;
    });
  }
  {
    std::unique_lock lock(reviewer.mu);
    reviewer.changed.wait(lock, [&] { return reviewer.waiting == RouteAccess::kMaxInFlight; });
  }
  auto refused = access.check(profile("one-more"));
  EXPECT_EQ(status_of(refused), 429);
  {
    std::lock_guard lock(reviewer.mu);
    reviewer.held = false;
  }
  reviewer.changed.notify_all();
  for (auto& t : reviewing) t.join();
  EXPECT_EQ(unauthenticated, RouteAccess::kMaxInFlight);
  EXPECT_EQ(access.stats().throttled, 1u);
  EXPECT_EQ(reviewer.token_reviews, RouteAccess::kMaxInFlight);
}

// /metrics as kube-rbac-proxy guards it: `get` on the non-resource URL, whatever the query says,
// with its own in-flight bound and cache.
TEST(RouteAccessTest, APathIsAllowedToWhoMayGetThatNonResourceUrl) {
  ScriptedReviewer reviewer;
  ::sonde::testing::ManualClock clock;
  RouteAccess access(reviewer, {.asks = RouteAccess::Asks::kPath, .max_in_flight = 1}, clock);
  HttpRequest scrape{"GET", "/metrics", {{"namespace", "a"}}, "Bearer alice"};
  EXPECT_EQ(status_of(access.check(scrape)), 200);
  EXPECT_EQ(reviewer.last_audience, "") << "a scrape's token is reviewed for the API server";
  EXPECT_EQ(status_of(access.check(scrape)), 200);
  EXPECT_EQ(reviewer.access_reviews, 1) << "the second scrape is answered from the cache";
  scrape.authorization = "Bearer other";
  EXPECT_EQ(status_of(access.check(scrape)), 401);
  scrape.authorization = "";
  auto none = access.check(scrape);
  ASSERT_EQ(status_of(none), 401);
  EXPECT_NE(none->body.find("the non-resource URL /metrics"), std::string::npos) << none->body;
  HttpRequest elsewhere{"GET", "/metrics/extra", {}, "Bearer alice"};
  auto refused = access.check(elsewhere);
  ASSERT_EQ(status_of(refused), 403);
  EXPECT_NE(refused->body.find("user \"alice\" may not get /metrics/extra"), std::string::npos)
      << refused->body;

  // One review at a time: a second unknown token waits for none, it is answered 429.
  reviewer.held = true;
  std::thread first([&] { (void)access.check({"GET", "/metrics", {}, "Bearer bad-1"}); });
  {
    std::unique_lock lock(reviewer.mu);
    reviewer.changed.wait(lock, [&] { return reviewer.waiting == 1; });
  }
  EXPECT_EQ(status_of(access.check({"GET", "/metrics", {}, "Bearer bad-2"})), 429);
  {
    std::lock_guard lock(reviewer.mu);
    reviewer.held = false;
  }
  reviewer.changed.notify_all();
  first.join();
}

TEST(RouteAccessTest, TokensAreKeptAsTheirSha256) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace sonde::agent
