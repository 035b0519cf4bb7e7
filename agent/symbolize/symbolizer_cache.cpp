#include "agent/symbolize/symbolizer_cache.h"

#include <utility>

namespace sonde::symbolize {

Result<std::shared_ptr<const BinarySymbolizer>> SymbolizerCache::get(const std::string& path) {
  ASSIGN_OR_RETURN(symbols::OpenBinary binary, symbols::OpenBinary::open(path));
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(binary.identity()); it != index_.end()) {
      if (it->second->symbolizer->file_changed()) {
        // Truncated or unreadable under its mapping: what it answers is no longer the file's.
        stats_.bytes -= it->second->bytes;
        lru_.erase(it->second);
        index_.erase(it);
      } else {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++stats_.hits;
        return it->second->symbolizer;
      }
    }
    ++stats_.misses;
  }
  // Parsed without the lock: a large binary takes tens of milliseconds and other binaries'
  // lookups should not wait for it. Two threads missing on one binary both parse it; the
  // second insert finds the first and uses it.
  ASSIGN_OR_RETURN(symbols::MappedFile mapping, binary.map());
  ASSIGN_OR_RETURN(std::unique_ptr<BinarySymbolizer> parsed,
                   BinarySymbolizer::from_mapping(std::move(mapping), path));
  std::shared_ptr<const BinarySymbolizer> symbolizer(std::move(parsed));
  size_t bytes = symbolizer->memory_bytes();

  std::lock_guard lock(mu_);
  if (auto it = index_.find(binary.identity()); it != index_.end()) return it->second->symbolizer;
  if (bytes > budget_) return symbolizer;
  lru_.push_front(Entry{binary.identity(), symbolizer, bytes});
  index_.emplace(binary.identity(), lru_.begin());
  stats_.bytes += bytes;
  evict_to_fit();
  return symbolizer;
}

void SymbolizerCache::evict_to_fit() {
  while (stats_.bytes > budget_ && !lru_.empty()) {
    Entry& victim = lru_.back();
    stats_.bytes -= victim.bytes;
    index_.erase(victim.identity);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

SymbolizerCache::Stats SymbolizerCache::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.entries = lru_.size();
  return s;
}

}  // namespace sonde::symbolize
