#include "agent/cluster/route_access.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>

#include "common/kube/resource.h"
#include "common/log.h"

namespace sonde::agent {
namespace {

const kube::ResourceType kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews", false};
const kube::ResourceType kSubjectAccessReviews{"authorization.k8s.io", "v1", "subjectaccessreviews",
                                               false};

HttpResponse plain(int status, std::string body) {
  return HttpResponse{.status = status, .body = std::move(body) + "\n"};
}

// "Bearer <token>" → the token; "" when the header is absent or of another scheme.
std::string bearer_token(const std::string& authorization) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size()) return "";
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
        std::tolower(static_cast<unsigned char>(kScheme[i]))) {
      return "";
    }
  }
  return authorization.substr(kScheme.size());
}

}  // namespace

std::string sha256_hex(const std::string& text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha256(), nullptr);
  std::string out;
  out.reserve(static_cast<size_t>(size) * 2);
  char byte[3];
  for (unsigned int i = 0; i < size; ++i) {
    (void)std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    out += byte;
  }
  return out;
}

RouteAccess::RouteAccess(AccessReviewer& reviewer, Options options, const Clock& clock)
    : reviewer_(reviewer), options_(std::move(options)), clock_(clock) {}

std::optional<HttpResponse> RouteAccess::answer(const Decision& d) {
  std::lock_guard lock(mu_);
  switch (d.status) {
    case 200: ++stats_.allowed; return std::nullopt;
    case 401: ++stats_.unauthenticated; break;
    default: ++stats_.forbidden; break;
  }
  HttpResponse r = plain(d.status, d.message);
  if (d.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::optional<HttpResponse> RouteAccess::check(const HttpRequest& request) {
  const bool path = options_.asks == Asks::kPath;
  const std::string token = bearer_token(request.authorization);
  if (token.empty()) {
    return answer(
        {401,
         "a bearer token is required (Authorization: Bearer <token>); the token's "
         "user needs 'get' on " +
             (path ? "the non-resource URL " + request.path : std::string("profiles.sonde.dev"))});
  }
  AccessReviewer::Permission wanted;
  if (path) {
    wanted.path = request.path;
  } else if (auto ns = request.query.find("namespace"); ns != request.query.end()) {
    wanted.ns = ns->second;
  }
  const std::string key = sha256_hex(token) + (path ? " " + wanted.path : "/" + wanted.ns);
  std::optional<Decision> cached;
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && clock_.now_ns() < it->second.expires_ns) {
      cached = it->second.decision;
    } else if (in_flight_ >= options_.max_in_flight) {
      ++stats_.throttled;
      return plain(429, "too many requests waiting for the API server to review their tokens");
    } else {
      ++in_flight_;
    }
  }
  if (cached) return answer(*cached);
  auto decision = review(token, wanted);
  {
    std::lock_guard lock(mu_);
    --in_flight_;
    if (!decision.ok()) {
      ++stats_.unavailable;
    } else {
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ages_.erase(it->second.age);
        cache_.erase(it);
      }
      while (cache_.size() >= options_.max_entries && !ages_.empty()) {
        cache_.erase(ages_.front());
        ages_.pop_front();
      }
      ages_.push_back(key);
      cache_[key] = {*decision, clock_.now_ns() + options_.ttl_ns, std::prev(ages_.end())};
    }
  }
  if (!decision.ok()) {
    log::warn("cannot review a request's token",
              {{"path", request.path}, {"error", decision.error().message()}});
    return plain(503, "the API server cannot review the token now: " + decision.error().message());
  }
  return answer(*decision);
}

Result<RouteAccess::Decision> RouteAccess::review(const std::string& token,
                                                  const AccessReviewer::Permission& wanted) {
  {
    std::lock_guard lock(mu_);
    ++stats_.reviews;
  }
  ASSIGN_OR_RETURN(auto verdict, reviewer_.review_token(token, options_.audience));
  if (!verdict.user) {
    return Decision{401, "the token is not valid" +
                             (verdict.error.empty() ? std::string() : ": " + verdict.error)};
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.reviews;
  }
  ASSIGN_OR_RETURN(bool allowed, reviewer_.may(*verdict.user, wanted));
  if (allowed) return Decision{200, ""};
  const std::string who = "user \"" + verdict.user->name + "\" may not get ";
  if (!wanted.path.empty()) return Decision{403, who + wanted.path};
  return Decision{403, who + "profiles.sonde.dev " +
                           (wanted.ns.empty() ? std::string("in every namespace (name one with "
                                                            "?namespace=)")
                                              : "in namespace \"" + wanted.ns + "\"")};
}

RouteAccess::Stats RouteAccess::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Result<AccessReviewer::TokenVerdict> ApiReviewer::review_token(const std::string& token,
                                                               const std::string& audience) {
  kube::Json spec = {{"token", token}};
  if (!audience.empty()) spec["audiences"] = kube::Json::array({audience});
  kube::Json review = {{"apiVersion", "authentication.k8s.io/v1"},
                       {"kind", "TokenReview"},
                       {"spec", std::move(spec)}};
  ASSIGN_OR_RETURN(auto out, api_.create(kTokenReviews, "", review, {.timeout = timeout_}));
  const kube::Json status = out.value("status", kube::Json::object());
  TokenVerdict v;
  v.error = status.value("error", "");
  if (!status.value("authenticated", false)) return v;
  // A client that names audiences must check the answer names one of them: an authenticator
  // that ignores spec.audiences would otherwise let a token minted for another service in.
  if (!audience.empty()) {
    bool ours = false;
    if (auto a = status.find("audiences"); a != status.end() && a->is_array()) {
      for (const auto& each : *a) ours = ours || (each.is_string() && each == audience);
    }
    if (!ours) {
      v.error = "the token was not issued for the audience \"" + audience + "\" (the review says " +
                status.value("audiences", kube::Json::array()).dump() + ")";
      return v;
    }
  }
  const kube::Json user = status.value("user", kube::Json::object());
  User u{user.value("username", ""), user.value("uid", ""), {}, {}};
  if (auto g = user.find("groups"); g != user.end() && g->is_array()) {
    for (const auto& group : *g) {
      if (group.is_string()) u.groups.push_back(group.get<std::string>());
    }
  }
  if (auto x = user.find("extra"); x != user.end() && x->is_object()) {
    for (const auto& [key, values] : x->items()) {
      if (!values.is_array()) continue;
      auto& out = u.extra[key];
      for (const auto& each : values) {
        if (each.is_string()) out.push_back(each.get<std::string>());
      }
    }
  }
  if (u.name.empty()) return v;
  v.user = std::move(u);
  return v;
}

Result<bool> ApiReviewer::may(const User& user, const Permission& permission) {
  kube::Json spec = {{"user", user.name}, {"groups", user.groups}};
  if (!permission.path.empty()) {
    spec["nonResourceAttributes"] = {{"verb", "get"}, {"path", permission.path}};
  } else {
    spec["resourceAttributes"] = {{"verb", "get"},
                                  {"group", "sonde.dev"},
                                  {"resource", "profiles"},
                                  {"namespace", permission.ns}};
  }
  if (!user.uid.empty()) spec["uid"] = user.uid;
  if (!user.extra.empty()) spec["extra"] = user.extra;
  kube::Json review = {{"apiVersion", "authorization.k8s.io/v1"},
                       {"kind", "SubjectAccessReview"},
                       {"spec", std::move(spec)}};
  ASSIGN_OR_RETURN(auto out, api_.create(kSubjectAccessReviews, "", review, {.timeout = timeout_}));
  return out.value("status", kube::Json::object()).value("allowed", false);
}

}  // namespace sonde::agent
