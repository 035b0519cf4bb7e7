// Test helper: one HTTP/1.1 GET on the loopback interface, for tests of the agent's HTTP routes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace sonde::testing {

struct HttpResult {
  int status = 0;  // 0: no connection or no HTTP response
  std::string body;
};

// GET `target` ("/metrics", "/path?query") from 127.0.0.1:port, reading until the server closes.
inline HttpResult http_get(int port, const std::string& target) {
  HttpResult r;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return r;
  }
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string resp;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  size_t end = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
  r.status = std::stoi(resp.substr(9, 3));
  r.body = resp.substr(end + 4);
  return r;
}

}  // namespace sonde::testing
