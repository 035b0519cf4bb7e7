// ProbeTargetCache: probe targets per (binary identity, symbol name), so a binary's symbol
// table is parsed once per real file instead of once per pid.
//
// Semantics:
//   - Entries are per (BinaryIdentity, name), not per binary: two callers asking different names
//     of one binary (Node.js and Go TLS probes can target the same executable) each get their
//     own answers, never the other caller's subset read as "absent".
//   - Absent names are cached as found == false: a binary without the symbol is parsed once.
//   - Unreadable or malformed binaries are not cached; the error is returned and the next call
//     tries again (the file may be readable later, or replaced). So are binaries that changed
//     while parsed (a truncation under the guarded mapping).
//   - Binaries over the caps of limits.h get the "too large to instrument" verdict
//     (is_too_large()); it is cached per identity as a negative answer (up to
//     kMaxRejectedBinaries, LRU) and returned again without opening the file, counted in
//     stats().too_large.
//   - A partial hit resolves all the missing names in a single parse.
//   - LRU-bounded (4096 entries by default); the least recently used entry goes first.
//
// Thread-safety: all methods may be called concurrently. The lock is not held while a binary
// is parsed, so a slow parse never blocks lookups of other binaries. A thread that misses while
// another thread parses the same binary waits for that parse and takes its answers; it parses
// itself only for names the other parse did not cover (each parse is counted).
//
// Memory: each entry holds one ProbeTarget (name, a few integers, at most kMaxReturnSites return
// and exit offsets) — usually a few hundred bytes, never more than ~2 KiB; nothing of the ELF
// file is kept. A rejected binary costs its identity and the verdict's message.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/symbols/binary_identity.h"
#include "agent/symbols/symbol_resolver.h"
#include "common/result.h"

namespace sonde::symbols {

// Counters since construction, for the agent's metrics.
struct ProbeTargetCacheStats {
  uint64_t hits = 0;       // names answered from the cache
  uint64_t misses = 0;     // names not in the cache when asked
  uint64_t parses = 0;     // binaries parsed to answer misses
  uint64_t evictions = 0;  // entries dropped by the LRU bound
  uint64_t errors = 0;     // resolve calls that failed (unreadable or malformed binary)
  uint64_t too_large = 0;  // resolve calls answered "too large to instrument" (parsed or cached)
  size_t entries = 0;      // entries held now
  size_t rejected = 0;     // binaries remembered as too large now
};

class ProbeTargetCache {
 public:
  static constexpr size_t kDefaultMaxEntries = 4096;
  // Too-large verdicts remembered. Each costs ~200 bytes; a node runs far fewer distinct
  // binaries than this, so the bound only matters against churn.
  static constexpr size_t kMaxRejectedBinaries = 1024;

  explicit ProbeTargetCache(size_t max_entries = kDefaultMaxEntries);
  ProbeTargetCache(const ProbeTargetCache&) = delete;
  ProbeTargetCache& operator=(const ProbeTargetCache&) = delete;

  // The targets of names (one per name, in order) in the binary at path, from the cache or by
  // one parse of the missing names. Opens the file once: identity and parse see the same file.
  Result<std::vector<ProbeTarget>> resolve(const std::string& path,
                                           std::span<const std::string> names);

  // As resolve(), for a binary already open (its identity computed by the caller).
  Result<std::vector<ProbeTarget>> resolve(const OpenBinary& binary,
                                           std::span<const std::string> names);

  // Only the cache: the targets when every name is cached for identity, else nullopt. Never
  // touches the file system. Counts hits and misses like resolve().
  std::optional<std::vector<ProbeTarget>> lookup(const BinaryIdentity& identity,
                                                 std::span<const std::string> names);

  ProbeTargetCacheStats stats() const;
  size_t max_entries() const { return max_entries_; }

 private:
  struct Entry {
    BinaryIdentity identity;
    ProbeTarget target;
  };
  // Views into the Entry that owns them; list nodes never move, so the views stay valid for
  // the entry's lifetime.
  struct Key {
    const BinaryIdentity* identity;
    std::string_view name;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct KeyEq {
    bool operator()(const Key& a, const Key& b) const {
      return a.name == b.name && *a.identity == *b.identity;
    }
  };
  using Lru = std::list<Entry>;  // most recently used first

  // With mu_ held: the cached target, moved to the front, or nullptr.
  const ProbeTarget* find_locked(const BinaryIdentity& identity, std::string_view name);
  // With mu_ held: inserts or replaces, then trims to max_entries_.
  void insert_locked(const BinaryIdentity& identity, ProbeTarget target);
  // With mu_ held: remembers the too-large verdict for identity.
  void reject_locked(const BinaryIdentity& identity, const Error& verdict);

  struct Rejected {
    BinaryIdentity identity;
    Error error;
  };
  using RejectedLru = std::list<Rejected>;  // most recently used first

  const size_t max_entries_;
  mutable std::mutex mu_;
  std::condition_variable parse_done_;
  // Binaries being parsed right now (by a thread that dropped mu_ to parse).
  std::unordered_set<BinaryIdentity, BinaryIdentityHash> parsing_;
  Lru lru_;
  std::unordered_map<Key, Lru::iterator, KeyHash, KeyEq> index_;
  RejectedLru rejected_;
  std::unordered_map<BinaryIdentity, RejectedLru::iterator, BinaryIdentityHash> rejected_index_;
  ProbeTargetCacheStats stats_;
};

}  // namespace sonde::symbols
