#include "agent/metrics/probe_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <string_view>
#include <vector>

namespace sonde::agent {
namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  UniqueFd fd;
  Clock::time_point deadline;
  std::string in;
  std::string out;  // the answer, once there is one
  size_t sent = 0;
  bool done = false;  // to be closed
};

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::string serialize(const HttpResponse& r, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n";
  for (const auto& [k, v] : r.headers) out.append(k).append(": ").append(v).append("\r\n");
  out += "\r\n";
  if (!head) out += r.body;
  return out;
}

HttpResponse plain(int status, std::string body) {
  return HttpResponse{.status = status, .body = std::move(body)};
}

// The answer to a complete request head (`head` ends with the blank line).
std::string answer(const ProbeServer::Routes& routes, std::string_view head) {
  std::string_view line = head.substr(0, head.find("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.")) {
    return serialize(plain(400, "bad request line\n"), false);
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view path = target.substr(0, target.find('?'));
  bool is_head = method == "HEAD";
  auto route = routes.find(std::string(path));
  if (route == routes.end()) return serialize(plain(404, "not found\n"), is_head);
  if (method != "GET" && !is_head) return serialize(plain(405, "GET or HEAD only\n"), false);
  HttpRequest request{.method = std::string(method), .path = std::string(path)};
  return serialize(route->second(request), is_head);
}

// Reads what `c` has sent and, once its head is complete, its answer. Never blocks.
void read_request(const ProbeServer::Routes& routes, Connection& c) {
  char buf[1024];
  while (c.out.empty()) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      c.done = true;  // closed or reset before asking
      return;
    }
    c.in.append(buf, static_cast<size_t>(n));
    size_t end = c.in.find("\r\n\r\n");
    if (end != std::string::npos && end + 4 <= ProbeServer::kMaxRequestBytes) {
      c.out = answer(routes, std::string_view(c.in).substr(0, end + 4));
    } else if (c.in.size() > ProbeServer::kMaxRequestBytes) {
      c.out = serialize(plain(431, "request too large\n"), false);
    }
  }
}

// Sends what is left of the answer; done once all of it is out (or the peer is gone).
void write_answer(Connection& c) {
  while (c.sent < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent,
                       MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) break;
    c.sent += static_cast<size_t>(n);
  }
  c.done = true;
}

void serve_connection(const ProbeServer::Routes& routes, Connection& c) {
  if (c.out.empty()) read_request(routes, c);
  if (!c.done && !c.out.empty()) write_answer(c);
}

Result<UniqueFd> listen_on(const std::string& address, int& port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Error("bad address \"" + address + "\": want host:port");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string service = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc =
          ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      rc != 0) {
    return Error("bad address \"" + address + "\": " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  UniqueFd fd(::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno_error("socket for " + address, errno);
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return errno_error("bind " + address + " (is the port in use? set --health-address)", errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) return errno_error("listen on " + address, errno);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    return errno_error("getsockname " + address, errno);
  }
  char port_text[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, nullptr, 0, port_text,
                    sizeof port_text, NI_NUMERICSERV) != 0) {
    return Error("getnameinfo " + address);
  }
  port = std::stoi(port_text);
  return fd;
}

}  // namespace

Result<std::unique_ptr<ProbeServer>> ProbeServer::start(const std::string& address, Routes routes) {
  std::unique_ptr<ProbeServer> self(new ProbeServer());
  self->routes_ = std::move(routes);
  ASSIGN_OR_RETURN(self->listener_, listen_on(address, self->port_));
  self->stop_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!self->stop_.valid()) return errno_error("eventfd for the probe server", errno);
  self->thread_ = std::thread([s = self.get()] { s->serve(); });
  return self;
}

ProbeServer::~ProbeServer() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
}

void ProbeServer::serve() {
  std::deque<Connection> conns;  // oldest first
  std::vector<pollfd> fds;
  // Out of descriptors (EMFILE), the pending connection stays and the listener stays readable:
  // accepting pauses instead of spinning.
  constexpr std::chrono::milliseconds kAcceptPause{100};
  Clock::time_point accept_again{};
  while (true) {
    auto now = Clock::now();
    auto next_deadline = now + kRequestDeadline;
    fds.clear();
    fds.push_back({stop_.get(), POLLIN, 0});
    if (now >= accept_again) {
      fds.push_back({listener_.get(), POLLIN, 0});
    } else {
      fds.push_back({listener_.get(), 0, 0});
      next_deadline = accept_again;
    }
    for (const auto& c : conns) {
      fds.push_back({c.fd.get(), static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - now);
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (n < 0 && errno != EINTR) std::abort();  // poll fails only on bad arguments
    if (fds[0].revents != 0) return;
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents != 0) serve_connection(routes_, conns[i]);
    }
    now = Clock::now();
    std::erase_if(conns, [&](const Connection& c) { return c.done || c.deadline <= now; });
    if (fds[1].revents == 0) continue;
    while (true) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) accept_again = now + kAcceptPause;
        break;
      }
      if (conns.size() == kMaxConnections) conns.pop_front();
      conns.push_back(Connection{.fd = UniqueFd(fd), .deadline = now + kRequestDeadline});
      // A probe's request is usually here already: answered without another poll round.
      serve_connection(routes_, conns.back());
      if (conns.back().done) conns.pop_back();
    }
  }
}

}  // namespace sonde::agent
