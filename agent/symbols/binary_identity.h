// BinaryIdentity: which real file a path leads to, independent of the path and of the mount it
// was reached through. It keys the probe-target cache.
//
// Why these fields. The same executable reaches the agent as /usr/bin/node,
// /proc/<pid>/root/usr/bin/node for every pid, and through one overlay mount per pod of an
// image. Overlay mounts over one read-only lower layer report the lower file's st_ino but their
// own st_dev, and a uprobe attached through any of them lands on the lower inode. So:
//   - the path is not used at all;
//   - st_dev is not used: it names the mount, not the file (overlay views must share a key);
//   - st_ino, st_size and st_mtim (ns) are used: a hard link shares all three, a copy gets a new
//     inode, a rewrite in place changes size or mtime, a rename-over replacement is a new inode;
//   - a content digest is added, because st_ino alone is only unique per filesystem: the GNU
//     build-id when present (it changes with every rebuild), else the Go build-id note, else a
//     64-bit FNV-1a digest of the file's first 4 KiB (ELF header, program headers, early notes).
// Two distinct files could still collide only by sharing inode number, size, mtime to the
// nanosecond and build-id (or header page) — then they are the same build, and the cached
// answers (addresses, offsets, return sites) are the same too. Attachment dedup needs more than
// this for that corner case: the same content on two filesystems is two inodes for the kernel.
//
// Cost of OpenBinary::open(): open + fstat + one 4 KiB pread (plus one per far-away note
// segment), a few microseconds; the file is not mapped until a parse needs it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "agent/symbols/elf_file.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::symbols {

struct BinaryIdentity {
  enum class DigestKind : uint8_t { kGnuBuildId, kGoBuildId, kHeaderDigest };

  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  DigestKind digest_kind = DigestKind::kHeaderDigest;
  uint8_t digest_size = 0;  // bytes of digest in use
  // A GNU build-id of up to 20 bytes verbatim; longer ones, Go build-ids and header digests
  // folded to 8 bytes.
  std::array<uint8_t, 20> digest{};

  bool operator==(const BinaryIdentity&) const = default;
  // "inode=.. size=.. mtime_ns=.. gnu-build-id=<hex>" (or go-build-id-digest / header-digest).
  std::string to_string() const;
  const char* digest_kind_name() const;
  std::string digest_hex() const;
};

struct BinaryIdentityHash {
  size_t operator()(const BinaryIdentity& id) const;
};

// The identity of the file open on fd: fstat plus a read of its first 4 KiB and, when they lie
// further out, of its program header table and first 8 PT_NOTE segments (at most 64 KiB each:
// bounded reads and memory whatever the file claims). Build-ids are looked for in
// PT_NOTE segments only; files without any (relocatable objects, some stripped builds) fall
// back to the header digest.
Result<BinaryIdentity> identify(int fd, const std::string& what);

// An open binary and its identity. The descriptor stays open so that a later map() sees the
// very file that was identified, even if the path is replaced in between. Move-only.
class OpenBinary {
 public:
  static Result<OpenBinary> open(const std::string& path);
  // A file opened already (a tenant's, through tenant_file.h); `path` names it in messages.
  static Result<OpenBinary> from_fd(UniqueFd fd, const std::string& path);

  const std::string& path() const { return path_; }
  const BinaryIdentity& identity() const { return identity_; }
  // The open descriptor (owned by this object): attaching through /proc/self/fd/<fd> reaches
  // exactly the identified file.
  int fd() const { return fd_.get(); }
  // Maps the whole file read-only; needed only to parse it (a cache miss). The caller owns the
  // mapping and decides how long it lives.
  Result<MappedFile> map() const { return MappedFile::map(fd_.get(), path_); }
  // The whole file, mapped on the first call and kept until this OpenBinary is destroyed; an
  // empty span when it cannot be mapped (ElfFile::parse then reports "not an ELF file"). Lazy
  // so that identifying a binary never maps it; not safe to call from two threads at once.
  std::span<const uint8_t> bytes() const;
  // After reading bytes(): why they are empty when the file could not be mapped (e.g. the
  // "too large" verdict of limits.h), or an Error when the file was truncated or failed to
  // read under the mapping (see mapped_file.h), so what was read must not be trusted or cached.
  Status check_bytes() const;

 private:
  OpenBinary(std::string path, UniqueFd fd, BinaryIdentity identity)
      : path_(std::move(path)), fd_(std::move(fd)), identity_(identity) {}

  std::string path_;
  UniqueFd fd_;
  BinaryIdentity identity_;
  mutable std::optional<MappedFile> mapping_;
  mutable std::optional<Error> map_error_;
};

}  // namespace sonde::symbols
