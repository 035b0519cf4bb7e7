// MappedFile: a read-only mapping of a whole file that cannot kill the agent with SIGBUS.
//
// The problem. Reading a file mapping past the file's current end (the file was truncated after
// it was mapped) or over a page the filesystem fails to read (I/O error on FUSE or NFS) raises
// SIGBUS, whose default action kills the process. Tenants control the binaries the agent maps,
// and can truncate them at will.
//
// The design: a guarded mapping. Every live MappedFile registers its address range in a fixed
// table (kMaxGuardedMappings slots, lock-free). A process-wide SIGBUS handler, installed the
// first time a file is mapped, looks the faulting address up: inside a registered mapping, it
// replaces the mapping from the faulting page to its end with anonymous zero pages
// (mmap MAP_FIXED, one system call) and marks the mapping faulted; the interrupted read then
// resumes and sees zeros. Any other SIGBUS is passed to the handler installed before (or to the
// default action), so real bugs still crash loudly.
//
// Why not pread-based copies: the symbol engine's documented properties rest on reading the
// mapped tables in place — a resolve streams node's 109k symbols and 7.5 MB string table without
// copying them, and the symbolizers keep names in the mapping for as long as they live. Copies
// would add tens of MB per parse and double the symbolizers' memory. A guarded mapping keeps
// every reader zero-copy, protects the long-lived symbolizers' lookups too (their names read as
// "" after a truncation, never a crash), and needs no change in the parsers: they already treat
// bytes as hostile (fuzzed), so zeros in place of the file's tail are just another malformed
// file. What the parse produced from such bytes is not trusted: callers check faulted() (or
// check()) after reading and discard the result, and caches re-open the file.
//
// Promises and costs:
//   - map() refuses files larger than kMaxBinaryBytes with the "too large" verdict (limits.h).
//   - At most kMaxGuardedMappings mappings live at once; one more is an error, not an
//     unguarded mapping.
//   - The handler runs only on SIGBUS; the guard costs nothing on ordinary reads.
//   - Thread-safe: mappings may be created, read and destroyed concurrently; faulted() may be
//     read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/result.h"

namespace sonde::symbols {

// Mappings that can be guarded at once. The agent keeps one per cached symbolizer plus the
// short-lived ones of parses in flight; a few hundred in practice.
inline constexpr size_t kMaxGuardedMappings = 4096;

// A read-only private mapping of a whole file, unmapped on destruction. Move-only.
class MappedFile {
 public:
  // Maps the file open on fd (not taken over). An empty file maps to an empty span.
  static Result<MappedFile> map(int fd, const std::string& what);
  // Opens path read-only, maps it and closes the descriptor again.
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

  // True once a read of the mapping hit a page the file no longer backs (truncated, or an I/O
  // error); from that page on the mapping reads as zeros. Stays true.
  bool faulted() const;
  // An Error naming what when faulted(), else ok: call after reading, before trusting results.
  Status check(const std::string& what) const;

 private:
  MappedFile(const uint8_t* data, size_t size, size_t slot)
      : data_(data), size_(size), slot_(slot) {}
  void reset();

  static constexpr size_t kNoSlot = SIZE_MAX;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t slot_ = kNoSlot;  // index into the guard table; kNoSlot when nothing is mapped
};

}  // namespace sonde::symbols
