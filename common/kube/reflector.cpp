#include "common/kube/reflector.h"

#include <random>

#include "common/log.h"

namespace sonde::kube {
namespace {

bool is_expired_status(const Json& status) {
  if (status.value("code", 0) == 410) return true;
  const std::string message = status.value("message", "");
  return message.find("too old resource version") != std::string::npos;
}

// resourceVersion=0: any version the API server's watch cache has (see the header on paging).
// A named string rather than a literal assignment, which GCC 12 at -O3 misreads as an
// overlapping memcpy (-Wrestrict, GCC bug 105329).
const std::string kFromWatchCache = "0";

// A watch that ends cleanly this fast without delivering anything is a server refusing to
// stream; back off rather than spin.
constexpr auto kMinHealthyWatch = std::chrono::seconds(1);

}  // namespace

Reflector::Reflector(ApiClient& client, ResourceType type, ReflectorOptions options,
                     ReflectorSink& sink, const Clock& clock)
    : client_(client),
      type_(std::move(type)),
      options_(std::move(options)),
      sink_(sink),
      clock_(clock) {}

std::string Reflector::last_resource_version() const {
  std::lock_guard lock(mu_);
  return last_rv_;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reflector::set_resource_version(const std::string& rv) {
  std::lock_guard lock(mu_);
  last_rv_ = rv;
}

void Reflector::run(StopSignal& stop) {
  Backoff backoff(options_.backoff);
  bool need_list = true;
  while (!stop.stopped()) {
    if (need_list) {
      Status listed = list_and_replace(stop);
      if (!listed.ok()) {
        if (stop.stopped()) return;
        {
          std::lock_guard lock(mu_);
          ++stats_.list_errors;
        }
        log::warn("list failed; retrying",
                  {{"resource", type_.plural}, {"error", listed.error().message()}});
        if (!stop.sleep_for(clock_, backoff.next())) return;
        continue;
      }
      need_list = false;
    }
    bool healthy = false;
    switch (watch_once(stop, healthy)) {
      case WatchOutcome::kResume:
        if (healthy) backoff.reset();
        break;
      case WatchOutcome::kRelist: need_list = true; break;
      case WatchOutcome::kBackoff:
        if (!stop.sleep_for(clock_, backoff.next())) return;
        break;
    }
  }
}

Status Reflector::list_and_replace(StopSignal& stop) {
  std::string list_rv;
  size_t count = 0;
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.limit = options_.page_size;
  options.resource_version = kFromWatchCache;
  sink_.begin_list();
  while (!stop.stopped()) {
    // The stop cancels a list in flight (and its retries), as it does the watch: Informer::stop()
    // must not wait out a request timeout times the retries against a hung server.
    auto page = client_.list(type_, options_.ns, options, {.stop = &stop});
    if (!page.ok()) {
      if (is_gone(page.error()) && !options.continue_token.empty()) {
        // The continue token outlived the server's compaction window: start over unpaged,
        // as a paged list could expire again for the same reason.
        log::info("list continuation expired; listing again without paging",
                  {{"resource", type_.plural}});
        sink_.begin_list();
        count = 0;
        list_rv.clear();
        options.continue_token.clear();
        options.resource_version = kFromWatchCache;
        options.limit = 0;
        continue;
      }
      return page.error();
    }
    if (list_rv.empty()) list_rv = page->resource_version;
    count += page->items.size();
    for (auto& item : page->items) sink_.list_item(std::move(item));
    if (page->continue_token.empty()) break;
    options.continue_token = std::move(page->continue_token);
    options.resource_version.clear();  // the server refuses both together
  }
  if (stop.stopped()) return Error("stopped");
  sink_.end_list(list_rv);
  set_resource_version(list_rv);
  {
    std::lock_guard lock(mu_);
    ++stats_.lists;
  }
  log::debug("listed",
             {{"resource", type_.plural}, {"items", count}, {"resource_version", list_rv}});
  return ok_status();
}

Reflector::WatchOutcome Reflector::watch_once(StopSignal& stop, bool& healthy) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int64_t min_seconds = std::max<int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.min_watch_timeout).count());
  std::uniform_int_distribution<int64_t> spread(min_seconds, 2 * min_seconds - 1);

  WatchOptions options;
  options.resource_version = last_resource_version();
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.timeout_seconds = spread(rng);
  options.allow_bookmarks = true;
  options.idle_timeout = options_.watch_idle_timeout;

  bool expired = false;
  std::string error_event;
  uint64_t delivered = 0;
  const SteadyTime started = clock_.now();
  {
    std::lock_guard lock(mu_);
    ++stats_.watches;
  }
  Status status = client_.watch(
      type_, options_.ns, options,
      [&](WatchEvent event) {
        if (event.type == WatchEvent::Type::kError) {
          if (is_expired_status(event.object)) {
            expired = true;
          } else {
            error_event = event.object.dump();
          }
          return false;
        }
        const std::string rv = resource_version_of(event.object);
        ++delivered;
        if (event.type == WatchEvent::Type::kBookmark) {
          std::lock_guard lock(mu_);
          ++stats_.bookmarks;
        } else {
          sink_.apply(event.type, std::move(event.object));
          std::lock_guard lock(mu_);
          ++stats_.events;
        }
        // Objects without a resourceVersion are malformed; keep the previous resume point.
        if (!rv.empty()) set_resource_version(rv);
        return true;
      },
      &stop);

  if (expired || (!status.ok() && is_gone(status.error()))) {
    log::info("watch resource version expired; listing again",
              {{"resource", type_.plural}, {"resource_version", options.resource_version}});
    std::lock_guard lock(mu_);
    ++stats_.relists_after_gone;
    return WatchOutcome::kRelist;
  }
  if (stop.stopped()) return WatchOutcome::kResume;
  if (!status.ok() && is_watch_idle(status.error())) {
    // Silence is not a failure of the collection: resume at once, without backoff, so a dead
    // connection is replaced within the idle timeout.
    log::info("watch silent; resuming",
              {{"resource", type_.plural}, {"error", status.error().message()}});
    std::lock_guard lock(mu_);
    ++stats_.watch_idle_restarts;
    return WatchOutcome::kResume;
  }
  healthy = delivered > 0;
  if (!error_event.empty() || !status.ok()) {
    {
      std::lock_guard lock(mu_);
      ++stats_.watch_errors;
    }
    log::warn("watch failed; resuming after backoff",
              {{"resource", type_.plural},
               {"resource_version", last_resource_version()},
               {"error", !status.ok() ? status.error().message() : error_event}});
    // A stream that delivered before it broke was healthy; resume at once the first time.
    return delivered > 0 ? WatchOutcome::kResume : WatchOutcome::kBackoff;
  }
  if (delivered == 0 && clock_.now() - started < kMinHealthyWatch) return WatchOutcome::kBackoff;
  healthy = true;
  return WatchOutcome::kResume;
}

}  // namespace sonde::kube
