// Test helper: raw TCP clients of a loopback server, for tests of what slow or malformed clients
// get from the agent's HTTP servers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "common/unique_fd.h"

namespace sonde::testing {

// A connected socket to 127.0.0.1:port, or an invalid one.
inline UniqueFd connect_loopback(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fd.reset();
  return fd;
}

inline bool send_all(const UniqueFd& fd, const std::string& bytes) {
  return ::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(bytes.size());
}

// Everything the server sends until it closes, waiting at most `timeout` in all; sets `closed`
// when the server closed (or reset) the connection within it.
inline std::string read_until_closed(const UniqueFd& fd, std::chrono::milliseconds timeout,
                                     bool* closed = nullptr) {
  auto until = std::chrono::steady_clock::now() + timeout;
  std::string out;
  if (closed) *closed = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

// One request as raw bytes, its whole answer (the server closes after it).
inline std::string exchange(int port, const std::string& request) {
  UniqueFd fd = connect_loopback(port);
  if (!fd.valid() || !send_all(fd, request)) return "";
  return read_until_closed(fd, std::chrono::seconds(5));
}

}  // namespace sonde::testing
