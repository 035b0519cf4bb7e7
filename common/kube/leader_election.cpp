#include "common/kube/leader_election.h"

#include <cmath>
#include <optional>
#include <random>

#include "common/log.h"
#include "common/rfc3339.h"

namespace sonde::kube {

Status validate(const LeaderElectionConfig& config) {
  if (config.lease_name.empty() || config.lease_namespace.empty() || config.identity.empty()) {
    return Error("leader election needs a lease name, a lease namespace and an identity");
  }
  if (config.renew_deadline >= config.lease_duration) {
    return Error("leader election: renew deadline must be shorter than the lease duration");
  }
  if (config.retry_period >= config.renew_deadline) {
    return Error("leader election: retry period must be shorter than the renew deadline");
  }
  return ok_status();
}

LeaderElector::LeaderElector(ApiClient& client, LeaderElectionConfig config, const Clock& clock)
    : client_(client), config_(std::move(config)), clock_(clock) {}

std::string LeaderElector::observed_leader() const {
  std::lock_guard lock(mu_);
  return observed_holder_;
}

bool LeaderElector::healthy() const {
  if (!leading_.load()) return true;
  const SteadyTime last{SteadyTime::duration(last_renew_.load())};
  return clock_.now() - last <= config_.renew_deadline;
}

bool LeaderElector::attempt(Duration budget, StopSignal* stop) {
  // What is left of the budget for the next call; nullopt once it is spent.
  const auto started = std::chrono::steady_clock::now();
  auto call = [&]() -> std::optional<CallOptions> {
    if (budget <= Duration::zero()) return CallOptions{.stop = stop};
    const Duration left = budget - (std::chrono::steady_clock::now() - started);
    if (left <= Duration::zero()) return std::nullopt;
    return CallOptions{.timeout = left, .stop = stop};
  };
  const std::string now = format_rfc3339(clock_.wall_now(), 6);
  // leaseDurationSeconds is whole seconds on the wire; round up so others never see a
  // shorter lease than we keep.
  const int64_t lease_seconds = std::max<int64_t>(
      1, static_cast<int64_t>(
             std::ceil(std::chrono::duration<double>(config_.lease_duration).count())));

  const auto get_call = call();
  if (!get_call) return false;
  auto current = client_.get(kLeases, config_.lease_namespace, config_.lease_name, *get_call);
  if (!current.ok() && is_not_found(current.error())) {
    const auto create_call = call();
    if (!create_call) return false;
    Json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec",
         {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", lease_seconds},
          {"acquireTime", now},
          {"renewTime", now},
          {"leaseTransitions", 0}}}};
    auto created = client_.create(kLeases, config_.lease_namespace, lease, *create_call);
    if (!created.ok()) {
      if (!is_conflict(created.error())) {
        log::warn("creating the leader lease failed", {{"error", created.error().message()}});
      }
      return false;
    }
    std::lock_guard lock(mu_);
    observed_spec_ = (*created)["spec"];
    observed_at_ = clock_.now();
    observed_holder_ = config_.identity;
    return true;
  }
  if (!current.ok()) {
    log::warn("reading the leader lease failed", {{"error", current.error().message()}});
    return false;
  }

  Json spec = current->value("spec", Json::object());
  const std::string holder = spec.value("holderIdentity", "");
  {
    std::lock_guard lock(mu_);
    if (spec != observed_spec_) {
      observed_spec_ = spec;
      observed_at_ = clock_.now();
    }
    observed_holder_ = holder;
    const Duration their_duration = std::chrono::seconds(spec.value("leaseDurationSeconds", 0));
    if (!holder.empty() && holder != config_.identity &&
        clock_.now() < observed_at_ + their_duration) {
      return false;  // held by someone else and not yet expired
    }
  }

  Json updated = *current;
  Json& new_spec = updated["spec"];
  new_spec["holderIdentity"] = config_.identity;
  new_spec["leaseDurationSeconds"] = lease_seconds;
  new_spec["renewTime"] = now;
  if (holder != config_.identity) {
    new_spec["acquireTime"] = now;
    new_spec["leaseTransitions"] = spec.value("leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  const auto update_call = call();
  if (!update_call) {
    log::warn("renewing the leader lease: no time left for the update after the read");
    return false;
  }
  auto written = client_.replace(kLeases, config_.lease_namespace, config_.lease_name, updated, "",
                                 *update_call);
  if (!written.ok()) {
    if (!is_conflict(written.error())) {
      log::warn("updating the leader lease failed", {{"error", written.error().message()}});
    }
    return false;
  }
  std::lock_guard lock(mu_);
  observed_spec_ = (*written)["spec"];
  observed_at_ = clock_.now();
  observed_holder_ = config_.identity;
  return true;
}

void LeaderElector::release() {
  // Best effort on the way out: bounded, so a hung server cannot hold up the exit.
  const CallOptions call{.timeout = config_.renew_deadline};
  auto current = client_.get(kLeases, config_.lease_namespace, config_.lease_name, call);
  if (!current.ok() || (*current)["spec"].value("holderIdentity", "") != config_.identity) return;
  Json updated = *current;
  updated["spec"]["holderIdentity"] = "";
  updated["spec"]["leaseDurationSeconds"] = 1;
  updated["spec"]["renewTime"] = format_rfc3339(clock_.wall_now(), 6);
  auto written =
      client_.replace(kLeases, config_.lease_namespace, config_.lease_name, updated, "", call);
  if (!written.ok()) {
    log::warn("releasing the leader lease failed", {{"error", written.error().message()}});
  }
}

bool LeaderElector::run(StopSignal& stop, const LeaderCallbacks& callbacks) {
  std::mt19937_64 rng{std::random_device{}()};
  // client-go spreads candidates' retries by up to 20% so they do not collide in step.
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  std::string last_reported;
  auto report_leader = [&] {
    const std::string leader = observed_leader();
    if (leader != last_reported) {
      last_reported = leader;
      if (callbacks.on_new_leader && !leader.empty()) callbacks.on_new_leader(leader);
    }
  };

  // Campaigning is harmless when slow, but one hung call must not stall it for good.
  while (!attempt(config_.renew_deadline, &stop)) {
    report_leader();
    const auto wait = std::chrono::duration_cast<Duration>(config_.retry_period * jitter(rng));
    if (!stop.sleep_for(clock_, wait)) return false;
  }
  SteadyTime last_renew = clock_.now();
  last_renew_.store(last_renew.time_since_epoch().count());
  leading_.store(true);
  report_leader();
  log::info("became leader", {{"lease", config_.lease_name}, {"identity", config_.identity}});
  if (callbacks.on_started_leading) callbacks.on_started_leading();

  bool lost = false;
  for (;;) {
    const SteadyTime deadline = last_renew + config_.renew_deadline;
    if (!stop.sleep_for(clock_,
                        std::min<Duration>(config_.retry_period, deadline - clock_.now()))) {
      break;
    }
    const Duration left = deadline - clock_.now();
    if (left > Duration::zero() && attempt(left, &stop)) {
      last_renew = clock_.now();
      last_renew_.store(last_renew.time_since_epoch().count());
      continue;
    }
    if (stop.stopped()) break;
    if (clock_.now() >= deadline) {
      lost = true;
      break;
    }
  }
  leading_.store(false);
  if (lost) {
    log::warn("lost leadership: lease not renewed within the renew deadline",
              {{"lease", config_.lease_name}, {"identity", config_.identity}});
  } else {
    release();
  }
  if (callbacks.on_stopped_leading) callbacks.on_stopped_leading();
  return lost;
}

}  // namespace sonde::kube
