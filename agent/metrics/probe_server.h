// ProbeServer: the agent's liveness and readiness endpoints (/healthz, /readyz) on a listener of
// their own, served by one thread that never waits on a client.
//
// Why not the metrics server: its pool (MetricsServer::kThreads) can be held by anyone who
// reaches the port -- clients that send their headers one byte at a time, profiles that take
// minutes -- and kubelet restarts the agent when /healthz does not answer within its probe
// timeout (1 s by default). Here every connection is multiplexed with poll() on one thread: a
// slow client costs one of kMaxConnections slots (when they are all taken, the oldest is
// closed to admit a new connection) and is closed at its deadline, kRequestDeadline after it
// connected; it never delays another. A probe, which sends its request at once, is answered in
// the poll round that accepts it.
//
// Only GET and HEAD of the registered paths are answered (404, 405 or 400 otherwise; 431 past
// kMaxRequestBytes), one request per connection. Handlers run on the server's thread: they must
// return promptly and never block on I/O (HealthRegistry::check reads a few fields under a lock).
//
// Routes are fixed at start(). The destructor stops the thread and closes every connection.
// Descriptors: the listener, an eventfd and at most kMaxConnections sockets.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "agent/metrics/metrics_server.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::agent {

class ProbeServer {
 public:
  // kubelet opens one connection per probe and period; 16 leave room for both probes, a human
  // with curl and a few stragglers, and stay well inside the descriptor reserve (fd_budget.h).
  static constexpr size_t kMaxConnections = 16;
  // A probe's request is one line and a few headers; nothing legitimate comes near 4 KiB.
  static constexpr size_t kMaxRequestBytes = 4096;
  // kubelet's default probe timeout is 1 s: a connection that has not sent its request (or
  // taken its answer) within twice that is not a probe worth waiting for.
  static constexpr std::chrono::milliseconds kRequestDeadline{2000};

  using Routes = std::map<std::string, MetricsServer::Handler>;

  // Listens on "host:port" (a numeric address; port 0 picks a free one) and starts the thread.
  // Fails with the reason (address in use, bad address).
  static Result<std::unique_ptr<ProbeServer>> start(const std::string& address, Routes routes);
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;

  int port() const { return port_; }

 private:
  ProbeServer() = default;
  void serve();

  Routes routes_;
  UniqueFd listener_;
  UniqueFd stop_;  // eventfd: readable once the destructor asks the thread to stop
  int port_ = 0;
  std::thread thread_;
};

}  // namespace sonde::agent
