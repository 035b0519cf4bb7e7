// SymbolizerCache: the BinarySymbolizer of every binary a profile touches, opened once per
// binary and kept while it fits a memory budget.
//
// Keyed by the symbol engine's BinaryIdentity (real inode, size, mtime, build-id), never by
// path: /usr/bin/node, /proc/<pid>/root/usr/bin/node and every overlay view of one image share
// one entry, and a binary replaced in place gets a new one. Bounded by bytes: each entry costs
// its heap tables and indexes (memory_bytes(); the file mapping is page cache and not counted);
// least recently used entries are evicted until the total fits. An entry larger than the whole
// budget is returned but not kept. Binaries that cannot be read or have no symbols are not
// cached (the next call retries). An entry whose file was truncated or failed to read under its
// mapping (BinarySymbolizer::file_changed()) is dropped at its next lookup and the binary
// re-opened. Thread-safe; returned symbolizers stay valid while held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "agent/symbolize/binary_symbolizer.h"
#include "agent/symbols/binary_identity.h"
#include "common/result.h"

namespace sonde::symbolize {

class SymbolizerCache {
 public:
  static constexpr size_t kDefaultBudgetBytes = size_t{256} << 20;

  explicit SymbolizerCache(size_t budget_bytes = kDefaultBudgetBytes) : budget_(budget_bytes) {}

  // The symbolizer for the binary at path; opens and parses it on a miss.
  Result<std::shared_ptr<const BinarySymbolizer>> get(const std::string& path);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
    size_t entries = 0;
    size_t bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    symbols::BinaryIdentity identity;
    std::shared_ptr<const BinarySymbolizer> symbolizer;
    size_t bytes;
  };
  using Lru = std::list<Entry>;  // most recently used first

  void evict_to_fit();  // requires mu_

  const size_t budget_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<symbols::BinaryIdentity, Lru::iterator, symbols::BinaryIdentityHash> index_;
  Stats stats_;
};

}  // namespace sonde::symbolize
