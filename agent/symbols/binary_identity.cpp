#include "agent/symbols/binary_identity.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/unique_fd.h"

namespace sonde::symbols {
namespace {

constexpr size_t kHeaderDigestBytes = 4096;

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

BinaryIdentity identify(const struct stat& st, std::span<const uint8_t> bytes, const ElfFile* elf) {
  BinaryIdentity id;
  id.inode = st.st_ino;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  const auto build_id = elf != nullptr ? elf->build_id() : std::nullopt;
  if (build_id && build_id->kind == BuildId::Kind::kGnu) {
    id.digest_kind = BinaryIdentity::DigestKind::kGnuBuildId;
    if (build_id->bytes.size() <= id.digest.size()) {
      std::copy(build_id->bytes.begin(), build_id->bytes.end(), id.digest.begin());
      id.digest_size = static_cast<uint8_t>(build_id->bytes.size());
    } else {
      store_folded(id, build_id->bytes);
    }
  } else if (build_id) {
    id.digest_kind = BinaryIdentity::DigestKind::kGoBuildId;
    store_folded(id, build_id->bytes);
  } else {
    id.digest_kind = BinaryIdentity::DigestKind::kHeaderDigest;
    store_folded(id, bytes.first(std::min(bytes.size(), kHeaderDigestBytes)));
  }
  return id;
}

Result<OpenBinary> OpenBinary::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return errno_error("open " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error("stat " + path, errno);
  ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::map(fd.get(), path));
  auto elf = ElfFile::parse(mapping.bytes());
  const BinaryIdentity id = identify(st, mapping.bytes(), elf.ok() ? &*elf : nullptr);
  return OpenBinary(path, std::move(mapping), id);
}

}  // namespace sonde::symbols
