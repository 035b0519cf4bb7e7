#include "agent/symbolize/binary_symbolizer.h"

#include <array>
#include <utility>

#include "agent/symbols/limits.h"

namespace sonde::symbolize {

Result<std::unique_ptr<BinarySymbolizer>> BinarySymbolizer::open(const std::string& path) {
  ASSIGN_OR_RETURN(symbols::MappedFile file, symbols::MappedFile::open(path));
  return from_mapping(std::move(file), path);
}

Result<std::unique_ptr<BinarySymbolizer>> BinarySymbolizer::from_mapping(symbols::MappedFile file,
                                                                         const std::string& what) {
  std::unique_ptr<BinarySymbolizer> self(new BinarySymbolizer());
  self->file_ = std::move(file);
  // Either table alone is useful: static Go binaries have no symbol table once stripped, C
  // binaries have no pclntab. Only when both are missing is there nothing to offer.
  auto go = GoBinary::from_bytes(self->file_.bytes());
  auto elf = ElfSymbolizer::from_bytes(self->file_.bytes());
  RETURN_IF_ERROR(self->file_.check(what));
  if (!go.ok() && !elf.ok()) {
    // A binary over a cap is over it for good: keep that verdict recognizable for callers.
    const Error& verdict = symbols::is_too_large(go.error()) ? go.error() : elf.error();
    return Error(
        what + ": no Go pclntab (" + go.error().message() + ") and " + elf.error().message(),
        verdict.code());
  }
  if (go.ok()) self->go_ = std::move(go).value();
  if (elf.ok()) self->elf_ = std::move(elf).value();
  return self;
}

size_t BinarySymbolizer::symbolize(uint64_t address, std::span<SymbolizedFrame> out) const {
  if (out.empty()) return 0;
  if (go_) {
    std::array<GoFrame, 32> frames;
    size_t want = std::min(out.size(), frames.size());
    size_t n = go_->pclntab().lookup_frames(address, std::span(frames).first(want));
    for (size_t i = 0; i < n; ++i) {
      out[i] =
          SymbolizedFrame{frames[i].function, frames[i].file, frames[i].line, 0, frames[i].inlined};
      if (!frames[i].inlined) out[i].offset = address - frames[i].entry;
    }
    if (n > 0) return n;
  }
  if (elf_) {
    if (auto hit = elf_->lookup(address)) {
      out[0] = SymbolizedFrame{hit->name, {}, 0, hit->offset, false};
      return 1;
    }
  }
  return 0;
}

bool BinarySymbolizer::file_changed() const {
  return file_.faulted();
}

size_t BinarySymbolizer::memory_bytes() const {
  size_t bytes = sizeof(*this);
  if (go_) bytes += sizeof(GoBinary) + go_->pclntab().index_bytes();
  if (elf_) bytes += sizeof(ElfSymbolizer) + elf_->table_bytes();
  return bytes;
}

}  // namespace sonde::symbolize
