#include "agent/symbols/binary_identity.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace sonde::symbols {
namespace {

constexpr size_t kHeaderDigestBytes = 4096;
// Reads per identify() are bounded whatever the headers claim: at most this many bytes for the
// program header table or one note segment, and at most kMaxNoteSegments note segments (real
// binaries have one to three), so identifying a hostile file reads at most ~580 KiB.
constexpr uint64_t kMaxNoteBytes = uint64_t{64} * 1024;
constexpr size_t kMaxNoteSegments = 8;

uint64_t fnv1a(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

void store_folded(BinaryIdentity& id, std::span<const uint8_t> bytes) {
  const uint64_t h = fnv1a(bytes);
  std::memcpy(id.digest.data(), &h, sizeof(h));
  id.digest_size = sizeof(h);
}

}  // namespace

const char* BinaryIdentity::digest_kind_name() const {
  switch (digest_kind) {
    case DigestKind::kGnuBuildId: return "gnu-build-id";
    case DigestKind::kGoBuildId: return "go-build-id-digest";
    case DigestKind::kHeaderDigest: return "header-digest";
  }
  return "unknown";
}

std::string BinaryIdentity::digest_hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < digest_size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string BinaryIdentity::to_string() const {
  return "inode=" + std::to_string(inode) + " size=" + std::to_string(size) +
         " mtime_ns=" + std::to_string(mtime_ns) + " " + digest_kind_name() + "=" + digest_hex();
}

size_t BinaryIdentityHash::operator()(const BinaryIdentity& id) const {
  uint64_t h = id.inode * 0x9e3779b97f4a7c15ull;
  h ^= id.size + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(id.mtime_ns) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  uint64_t d = 0;
  std::memcpy(&d, id.digest.data(), sizeof(d));
  h ^= d + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

namespace {

// Reads up to length bytes at offset, retrying short reads; returns how many were read.
Result<size_t> read_at(int fd, uint8_t* out, size_t length, uint64_t offset,
                       const std::string& what) {
  size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read " + what, errno);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// The bytes [offset, offset + length) of the file: from head when it holds them, else read
// into storage. Empty when out of the file or larger than kMaxNoteBytes.
std::span<const uint8_t> file_range(int fd, std::span<const uint8_t> head, uint64_t offset,
                                    uint64_t length, uint64_t file_size,
                                    std::vector<uint8_t>& storage, const std::string& what) {
  if (offset > file_size || length > file_size - offset || length > kMaxNoteBytes) return {};
  if (offset <= head.size() && length <= head.size() - offset) {
    return head.subspan(offset, length);
  }
  storage.resize(length);
  auto n = read_at(fd, storage.data(), length, offset, what);
  if (!n.ok() || *n != length) return {};
  return storage;
}

}  // namespace

Result<BinaryIdentity> identify(int fd, const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("stat " + what, errno);
  if (!S_ISREG(st.st_mode)) return Error(what + ": not a regular file", EINVAL);
  BinaryIdentity id;
  id.inode = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;

  std::array<uint8_t, kHeaderDigestBytes> head_buf;
  ASSIGN_OR_RETURN(const size_t head_len, read_at(fd, head_buf.data(), head_buf.size(), 0, what));
  const std::span<const uint8_t> head(head_buf.data(), head_len);

  // Only what is needed to reach the PT_NOTE segments; ElfFile::parse does the full checks
  // when the file is parsed for symbols.
  std::vector<std::vector<uint8_t>> storage;
  std::vector<std::span<const uint8_t>> notes;
  Elf64_Ehdr ehdr;
  if (head.size() >= sizeof(ehdr) && std::memcmp(head.data(), ELFMAG, SELFMAG) == 0 &&
      head[EI_CLASS] == ELFCLASS64 && head[EI_DATA] == ELFDATA2LSB) {
    std::memcpy(&ehdr, head.data(), sizeof(ehdr));
    if (ehdr.e_phentsize == sizeof(Elf64_Phdr) && ehdr.e_phnum != PN_XNUM) {
      std::vector<uint8_t> table_storage;
      const auto table =
          file_range(fd, head, ehdr.e_phoff, uint64_t{ehdr.e_phnum} * sizeof(Elf64_Phdr), id.size,
                     table_storage, what);
      for (size_t off = 0; off + sizeof(Elf64_Phdr) <= table.size(); off += sizeof(Elf64_Phdr)) {
        Elf64_Phdr phdr;
        std::memcpy(&phdr, table.data() + off, sizeof(phdr));
        if (phdr.p_type != PT_NOTE) continue;
        if (notes.size() == kMaxNoteSegments) break;
        storage.emplace_back();
        notes.push_back(
            file_range(fd, head, phdr.p_offset, phdr.p_filesz, id.size, storage.back(), what));
      }
    }
  }

  for (BuildId::Kind kind : {BuildId::Kind::kGnu, BuildId::Kind::kGo}) {
    for (const auto& area : notes) {
      const auto build_id = find_build_id_note(area, kind);
      if (!build_id) continue;
      if (kind == BuildId::Kind::kGnu) {
        id.digest_kind = BinaryIdentity::DigestKind::kGnuBuildId;
        if (build_id->bytes.size() <= id.digest.size()) {
          std::copy(build_id->bytes.begin(), build_id->bytes.end(), id.digest.begin());
          id.digest_size = static_cast<uint8_t>(build_id->bytes.size());
        } else {
          store_folded(id, build_id->bytes);
        }
      } else {
        id.digest_kind = BinaryIdentity::DigestKind::kGoBuildId;
        store_folded(id, build_id->bytes);
      }
      return id;
    }
  }
  id.digest_kind = BinaryIdentity::DigestKind::kHeaderDigest;
  store_folded(id, head);
  return id;
}

std::span<const uint8_t> OpenBinary::bytes() const {
  if (!mapping_) {
    auto mapping = map();
    if (!mapping.ok()) map_error_.emplace(mapping.error());
    mapping_.emplace(mapping.ok() ? std::move(*mapping) : MappedFile());
  }
  return mapping_->bytes();
}

Status OpenBinary::check_bytes() const {
  if (map_error_) return *map_error_;
  if (!mapping_) return ok_status();
  return mapping_->check(path_);
}

Result<OpenBinary> OpenBinary::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error("open " + path, errno);
  return from_fd(std::move(fd), path);
}

Result<OpenBinary> OpenBinary::from_fd(UniqueFd fd, const std::string& path) {
  ASSIGN_OR_RETURN(const BinaryIdentity id, identify(fd.get(), path));
  return OpenBinary(path, std::move(fd), id);
}

}  // namespace sonde::symbols
