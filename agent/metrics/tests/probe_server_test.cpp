// ProbeServer over real sockets: /healthz answers at once while slow clients hold every other
// slot, slow clients are closed at their deadline, and only GET/HEAD of its routes are served.
#include "agent/metrics/probe_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "agent/metrics/tests/raw_client.h"
#include "agent/tests/http_get.h"

namespace sonde::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::connect_loopback;
using testing::exchange;
using testing::read_until_closed;
using testing::send_all;

class ProbeServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ProbeServer::start("127.0.0.1:0",
                                {{"/healthz", [this](const HttpRequest&) {
                                    ++calls_;
                                    return HttpResponse{
                                        .status = healthy_ ? 200 : 503,
                                        .body = healthy_ ? "ok\n" : "[-]event-thread stuck\n"};
                                  }}});
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(s).value();
  }
  std::atomic<bool> healthy_ = true;
  std::atomic<int> calls_ = 0;
  std::unique_ptr<ProbeServer> server_;
};

TEST_F(ProbeServerTest, AnswersWhileSlowClientsHoldEverySlot) {
  // Twice as many clients as slots, each having sent part of a request head and stopped.
  std::vector<UniqueFd> slow;
  for (size_t i = 0; i < 2 * ProbeServer::kMaxConnections; ++i) {
    slow.push_back(connect_loopback(server_->port()));
    ASSERT_TRUE(slow.back().valid());
    ASSERT_TRUE(send_all(slow.back(), "GET /hea"));
  }
  for (int i = 0; i < 5; ++i) {
    auto start = steady_clock::now();
    auto r = testing::http_get(server_->port(), "/healthz");
    auto took = steady_clock::now() - start;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok\n");
    EXPECT_LT(took, milliseconds(250)) << "a probe waited on slow clients";
  }
  // The newest slow clients kept their slots; they too are closed at their deadline.
  bool closed = false;
  std::string got =
      read_until_closed(slow.back(), ProbeServer::kRequestDeadline + milliseconds(1000), &closed);
  EXPECT_TRUE(closed) << "a client that never finishes its request keeps its connection";
  EXPECT_EQ(got, "") << "answered a request it never completed";
}

TEST_F(ProbeServerTest, ClosesAClientThatDripsPastTheDeadline) {
  UniqueFd drip = connect_loopback(server_->port());
  ASSERT_TRUE(drip.valid());
  auto start = steady_clock::now();
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t i = 0;
  bool closed = false;
  // One byte every 300 ms: each read is prompt, the whole head takes ~10 s.
  while (!closed && i < head.size()) {
    if (!send_all(drip, head.substr(i++, 1))) break;
    read_until_closed(drip, milliseconds(300), &closed);
  }
  auto lived = steady_clock::now() - start;
  EXPECT_LT(lived, ProbeServer::kRequestDeadline + milliseconds(700));
  EXPECT_GE(lived, ProbeServer::kRequestDeadline - milliseconds(100));
  EXPECT_LT(i, head.size()) << "the whole head got through, one byte at a time";
}

TEST_F(ProbeServerTest, ServesOnlyGetAndHeadOfItsRoutes) {
  auto get = exchange(server_->port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(get.starts_with("HTTP/1.1 200 OK\r\n")) << get;
  EXPECT_NE(get.find("Content-Length: 3\r\n"), std::string::npos) << get;
  EXPECT_TRUE(get.ends_with("\r\n\r\nok\n")) << get;
  auto with_query = exchange(server_->port(), "GET /healthz?verbose HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(with_query.starts_with("HTTP/1.1 200 ")) << with_query;
  auto head = exchange(server_->port(), "HEAD /healthz HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 ")) << head;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << "HEAD carries no body: " << head;
  EXPECT_TRUE(
      exchange(server_->port(), "POST /healthz HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
  EXPECT_TRUE(
      exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
  EXPECT_TRUE(exchange(server_->port(), "hello\r\n\r\n").starts_with("HTTP/1.1 400 "));
  std::string huge =
      "GET /healthz HTTP/1.1\r\nX: " + std::string(ProbeServer::kMaxRequestBytes, 'x');
  EXPECT_TRUE(exchange(server_->port(), huge).starts_with("HTTP/1.1 431 "));
  EXPECT_EQ(calls_, 3) << "the handler ran for the three GET/HEAD of /healthz only";
}

TEST_F(ProbeServerTest, PassesTheHandlersStatusAndBody) {
  healthy_ = false;
  auto r = testing::http_get(server_->port(), "/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body, "[-]event-thread stuck\n");
}

TEST(ProbeServer, FailsOnAPortInUse) {
  auto first = ProbeServer::start("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto second = ProbeServer::start("127.0.0.1:" + std::to_string((*first)->port()), {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("in use"), std::string::npos) << second.error().message();
  EXPECT_FALSE(ProbeServer::start("localhost:80", {}).ok()) << "names are not resolved";
}

}  // namespace
}  // namespace sonde::agent
