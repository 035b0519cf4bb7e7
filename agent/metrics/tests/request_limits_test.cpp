// MetricsServer's limits on what one client can hold: slow /debug/ requests take at most
// kMaxDebugRequests threads (one more is refused at once, scrapes still answered), and a client
// dripping its request head is closed at kRequestTimeoutMs however steadily it drips.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "agent/metrics/tests/raw_client.h"
#include "agent/tests/http_get.h"

namespace sonde::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(RequestLimits, SlowDebugRequestsTakeAtMostTheirShareOfThreads) {
  std::atomic<int> guarded = 0;
  auto started = MetricsServer::start("127.0.0.1:0", [&](const HttpRequest&) {
    ++guarded;
    return std::optional<HttpResponse>{};
  });
  ASSERT_TRUE(started.ok()) << started.error().message();
  auto& server = **started;
  std::mutex mu;
  std::condition_variable cv;
  int entered = 0;
  bool release = false;
  server.add_route("/debug/slow", [&](const HttpRequest&) {
    std::unique_lock lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return HttpResponse{.body = "slow\n"};
  });
  std::vector<std::future<testing::HttpResult>> slow;
  slow.reserve(MetricsServer::kMaxDebugRequests);
  for (int i = 0; i < MetricsServer::kMaxDebugRequests; ++i) {
    slow.push_back(std::async(std::launch::async,
                              [&] { return testing::http_get(server.port(), "/debug/slow"); }));
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10),
                            [&] { return entered == MetricsServer::kMaxDebugRequests; }));
  }
  auto start = steady_clock::now();
  // Raw, with a timeout: without the limit this request would wait for the release too.
  auto refused = testing::exchange(server.port(), "GET /debug/slow HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 429 ")) << refused;
  EXPECT_LT(steady_clock::now() - start, milliseconds(500)) << "refused late";
  EXPECT_EQ(guarded, MetricsServer::kMaxDebugRequests) << "the refused request was reviewed";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(testing::http_get(server.port(), "/metrics").status, 200);
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  for (auto& f : slow) EXPECT_EQ(f.get().status, 200);
  // The places are given back.
  EXPECT_EQ(testing::http_get(server.port(), "/debug/slow").status, 200);
}

TEST(RequestLimits, ADrippingClientIsClosedAtTheRequestTimeout) {
  auto started = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(started.ok()) << started.error().message();
  UniqueFd drip = testing::connect_loopback((*started)->port());
  ASSERT_TRUE(drip.valid());
  // One header byte a second, forever: no single read waits long, the head never ends.
  auto start = steady_clock::now();
  ASSERT_TRUE(testing::send_all(drip, "GET /metrics HTTP/1.1\r\n"));
  bool closed = false;
  const auto bound = milliseconds(MetricsServer::kRequestTimeoutMs + 3000);
  while (!closed && steady_clock::now() - start < bound) {
    if (!testing::send_all(drip, "X")) break;
    testing::read_until_closed(drip, milliseconds(1000), &closed);
  }
  auto lived = steady_clock::now() - start;
  EXPECT_LT(lived, bound) << "a client dripping its head holds a thread without end";
  EXPECT_GE(lived, milliseconds(MetricsServer::kRequestTimeoutMs - 1500));
}

}  // namespace
}  // namespace sonde::agent
