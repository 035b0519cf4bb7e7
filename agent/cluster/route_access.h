// RouteAccess: who may read the agent's debug routes (/debug/...: CPU profiles) and, when asked
// (--metrics-authorization), /metrics in cluster mode, decided by the API server the way
// Kubernetes' own components do it. A request carries a bearer
// token (Authorization: Bearer ...); a TokenReview authenticates it (for `audience` when set, else
// the API server's own; the review's answer must name that audience among the token's, or the
// token is refused), then a SubjectAccessReview, carrying the user's groups, uid and extra
// attributes as the TokenReview gave them, asks whether its user may
//   get profiles.sonde.dev            (a virtual resource: nothing is stored)
// in the namespace the request's `namespace` parameter names, or in every namespace when it names
// none (a profile without that filter covers every selected container on the node). Grant it with
// a Role(Binding) in a tenant's namespace, or a ClusterRole for everything (docs/cpu-profiles.md,
// "Who may read profiles"). For /metrics (Asks::kPath) the review asks, as kube-rbac-proxy does,
// whether the user may `get` the non-resource URL /metrics (a ClusterRole's nonResourceURLs).
//
// Answers: 401 without a token or for one the API server does not authenticate (forged, expired,
// wrong audience), 403 when the review denies, 503 when the API server cannot be asked (an
// unreachable server is never an open door), 429 when kMaxInFlight reviews are already running
// (a flood of unknown tokens costs at most that many API calls at a time). Decisions, allowed or
// not, are kept for `ttl` per (token, namespace), at most `max_entries` of them (oldest dropped),
// keyed by the token's SHA-256, never the token itself. Errors are not kept.
//
// Thread-safe: the metrics server's threads call check() concurrently; reviews run outside the
// lock.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/metrics/metrics_server.h"
#include "common/clock.h"
#include "common/kube/api_client.h"
#include "common/result.h"

namespace sonde::agent {

// The two reviews, asked of the API server (ApiReviewer) or a fake in tests.
class AccessReviewer {
 public:
  struct User {
    std::string name;
    std::string uid;
    std::vector<std::string> groups;
    // The authenticator's extra attributes (scopes, the node a token is bound to, ...): passed
    // on to the SubjectAccessReview, whose authorizers may decide by them.
    std::map<std::string, std::vector<std::string>> extra;
  };
  struct TokenVerdict {
    std::optional<User> user;  // nullopt: not authenticated
    std::string error;         // the API server's reason when not authenticated
  };
  virtual ~AccessReviewer() = default;
  // An Error only when the API server could not answer.
  virtual Result<TokenVerdict> review_token(const std::string& token,
                                            const std::string& audience) = 0;
  // What a request asks for: `get` on profiles.sonde.dev in `ns` ("" = every namespace), or, when
  // `path` is set, `get` on that non-resource URL.
  struct Permission {
    std::string ns;
    std::string path;
  };
  // Whether `user` has `permission`.
  virtual Result<bool> may(const User& user, const Permission& permission) = 0;
};

class RouteAccess {
 public:
  static constexpr int kMaxInFlight = 4;
  // What a request must be allowed: profiles (the /debug/ routes) or `get` on its path (/metrics).
  enum class Asks { kProfiles, kPath };
  struct Options {
    std::string audience;  // "" = the API server's audience
    Asks asks = Asks::kProfiles;
    uint64_t ttl_ns = 10'000'000'000;
    size_t max_entries = 1024;
    int max_in_flight = kMaxInFlight;  // reviews at once; one more request is answered 429
  };
  RouteAccess(AccessReviewer& reviewer, Options options, const Clock& clock = real_clock());

  // nullopt: allowed; otherwise the answer to send instead of the route's.
  std::optional<HttpResponse> check(const HttpRequest& request);

  struct Stats {
    uint64_t allowed = 0, unauthenticated = 0, forbidden = 0, unavailable = 0, throttled = 0;
    uint64_t reviews = 0;  // TokenReviews and SubjectAccessReviews sent
  };
  Stats stats() const;

 private:
  struct Decision {
    int status = 200;  // 200, 401 or 403
    std::string message;
  };
  struct Entry {
    Decision decision;
    uint64_t expires_ns;
    std::list<std::string>::iterator age;
  };
  Result<Decision> review(const std::string& token, const AccessReviewer::Permission& wanted);
  std::optional<HttpResponse> answer(const Decision& d);

  AccessReviewer& reviewer_;
  const Options options_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> cache_;  // SHA-256(token) + "/" + namespace, or + " " + path
  std::list<std::string> ages_;         // cache keys, oldest first
  int in_flight_ = 0;
  Stats stats_;
};

// The reviews through the API server (the agent's ClusterRole grants `create` on tokenreviews
// and subjectaccessreviews). Each call is bounded by `timeout`.
class ApiReviewer final : public AccessReviewer {
 public:
  explicit ApiReviewer(kube::ApiClient& api, Duration timeout = std::chrono::seconds(5))
      : api_(api), timeout_(timeout) {}
  Result<TokenVerdict> review_token(const std::string& token, const std::string& audience) override;
  Result<bool> may(const User& user, const Permission& permission) override;

 private:
  kube::ApiClient& api_;
  Duration timeout_;
};

// SHA-256 of text, in hex.
std::string sha256_hex(const std::string& text);

}  // namespace sonde::agent
