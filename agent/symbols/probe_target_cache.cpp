#include "agent/symbols/probe_target_cache.h"

#include <functional>

namespace sonde::symbols {
namespace {

// Maps the binary only for the duration of the parse: the mapping is gone on return. A file
// that changed under the parse reports that (never cached), whatever the parser concluded
// from the zeros it read.
Result<std::vector<ProbeTarget>> parse_and_resolve(const OpenBinary& binary,
                                                   std::span<const std::string> names) {
  ASSIGN_OR_RETURN(MappedFile mapping, binary.map());
  auto elf = ElfFile::parse(mapping.bytes());
  Result<std::vector<ProbeTarget>> targets =
      elf.ok() ? resolve(*elf, names) : Result<std::vector<ProbeTarget>>(elf.error());
  RETURN_IF_ERROR(mapping.check(binary.path()));
  if (!targets.ok()) return targets.error().wrap(binary.path());
  return targets;
}

}  // namespace

size_t ProbeTargetCache::KeyHash::operator()(const Key& k) const {
  const size_t h = BinaryIdentityHash{}(*k.identity);
  return h ^ (std::hash<std::string_view>{}(k.name) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

ProbeTargetCache::ProbeTargetCache(size_t max_entries)
    : max_entries_(max_entries == 0 ? 1 : max_entries) {}

const ProbeTarget* ProbeTargetCache::find_locked(const BinaryIdentity& identity,
                                                 std::string_view name) {
  auto it = index_.find(Key{&identity, name});
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->target;
}

void ProbeTargetCache::insert_locked(const BinaryIdentity& identity, ProbeTarget target) {
  if (auto it = index_.find(Key{&identity, target.name}); it != index_.end()) {
    // Another thread resolved the same name meanwhile; keep one entry.
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.push_front(Entry{identity, std::move(target)});
  Entry& e = lru_.front();
  index_.emplace(Key{&e.identity, e.target.name}, lru_.begin());
  while (lru_.size() > max_entries_) {
    Entry& victim = lru_.back();
    index_.erase(Key{&victim.identity, victim.target.name});
    lru_.pop_back();
    ++stats_.evictions;
  }
}

void ProbeTargetCache::reject_locked(const BinaryIdentity& identity, const Error& verdict) {
  if (rejected_index_.contains(identity)) return;
  rejected_.push_front(Rejected{identity, verdict});
  rejected_index_.emplace(identity, rejected_.begin());
  while (rejected_.size() > kMaxRejectedBinaries) {
    rejected_index_.erase(rejected_.back().identity);
    rejected_.pop_back();
  }
}

std::optional<std::vector<ProbeTarget>> ProbeTargetCache::lookup(
    const BinaryIdentity& identity, std::span<const std::string> names) {
  std::vector<ProbeTarget> out;
  out.reserve(names.size());
  std::lock_guard lock(mu_);
  for (const auto& name : names) {
    const ProbeTarget* t = find_locked(identity, name);
    if (t == nullptr) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    out.push_back(*t);
  }
  return out;
}

Result<std::vector<ProbeTarget>> ProbeTargetCache::resolve(const std::string& path,
                                                           std::span<const std::string> names) {
  auto binary = OpenBinary::open(path);
  if (!binary.ok()) {
    std::lock_guard lock(mu_);
    ++stats_.errors;
    return binary.error();
  }
  return resolve(*binary, names);
}

Result<std::vector<ProbeTarget>> ProbeTargetCache::resolve(const OpenBinary& binary,
                                                           std::span<const std::string> names) {
  const BinaryIdentity& identity = binary.identity();
  std::vector<ProbeTarget> out(names.size());
  std::vector<size_t> missing;
  std::unique_lock lock(mu_);
  auto collect = [&] {
    missing.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      if (const ProbeTarget* t = find_locked(identity, names[i])) {
        out[i] = *t;
      } else {
        missing.push_back(i);
      }
    }
  };
  collect();
  // Pods of one image tend to start together: when another thread is already parsing this
  // binary, its answers probably cover ours, so wait for it instead of parsing the file again.
  while (!missing.empty() && parsing_.contains(identity)) {
    parse_done_.wait(lock);
    collect();
  }
  if (auto it = rejected_index_.find(identity); !missing.empty() && it != rejected_index_.end()) {
    rejected_.splice(rejected_.begin(), rejected_, it->second);
    ++stats_.too_large;
    return it->second->error;
  }
  stats_.hits += names.size() - missing.size();
  stats_.misses += missing.size();
  if (missing.empty()) return out;

  parsing_.insert(identity);
  lock.unlock();
  std::vector<std::string> wanted;
  wanted.reserve(missing.size());
  for (size_t i : missing) wanted.push_back(names[i]);
  // The parse runs unlocked so lookups of other binaries are never blocked behind it.
  Result<std::vector<ProbeTarget>> resolved = parse_and_resolve(binary, wanted);
  lock.lock();
  parsing_.erase(identity);
  parse_done_.notify_all();
  if (!resolved.ok() && is_too_large(resolved.error())) {
    ++stats_.parses;
    ++stats_.too_large;
    reject_locked(identity, resolved.error());
    return resolved.error();
  }
  if (!resolved.ok()) {
    ++stats_.errors;
    return resolved.error();
  }
  ++stats_.parses;
  for (size_t j = 0; j < missing.size(); ++j) {
    out[missing[j]] = (*resolved)[j];
    insert_locked(identity, std::move((*resolved)[j]));
  }
  return out;
}

ProbeTargetCacheStats ProbeTargetCache::stats() const {
  std::lock_guard lock(mu_);
  ProbeTargetCacheStats s = stats_;
  s.entries = lru_.size();
  s.rejected = rejected_.size();
  return s;
}

}  // namespace sonde::symbols
