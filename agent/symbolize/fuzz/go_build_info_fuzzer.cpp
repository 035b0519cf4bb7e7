// libFuzzer target for the .go.buildinfo reader. The fuzz bytes are the section's contents,
// wrapped in a minimal ELF64 file whose one PT_LOAD maps the whole file at kBase, so the
// pre-1.18 layout's pointers (to string headers, to strings) resolve into the input itself.
// Any crash, sanitizer report, hang or large allocation is a bug.
#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "agent/symbolize/go_build_info.h"

namespace {

constexpr uint64_t kBase = 0x400000;
constexpr char kNames[] = "\0.go.buildinfo\0.shstrtab";  // offsets 1 and 15

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, const T& value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // [ehdr][phdr][names][section data][3 section headers]
  const size_t names_at = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
  const size_t data_at = names_at + sizeof(kNames);
  const size_t shdrs_at = (data_at + size + 7) & ~size_t{7};
  std::vector<uint8_t> file(shdrs_at + 3 * sizeof(Elf64_Shdr), 0);
  std::memcpy(file.data() + names_at, kNames, sizeof(kNames));
  if (size > 0) std::memcpy(file.data() + data_at, data, size);

  Elf64_Ehdr ehdr{};
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
  ehdr.e_type = ET_EXEC;
  ehdr.e_machine = EM_X86_64;
  ehdr.e_phoff = sizeof(Elf64_Ehdr);
  ehdr.e_phentsize = sizeof(Elf64_Phdr);
  ehdr.e_phnum = 1;
  ehdr.e_shoff = shdrs_at;
  ehdr.e_shentsize = sizeof(Elf64_Shdr);
  ehdr.e_shnum = 3;
  ehdr.e_shstrndx = 2;
  put(file, 0, ehdr);
  Elf64_Phdr phdr{};
  phdr.p_type = PT_LOAD;
  phdr.p_flags = PF_R;
  phdr.p_vaddr = kBase;
  phdr.p_filesz = phdr.p_memsz = file.size();
  put(file, sizeof(Elf64_Ehdr), phdr);
  Elf64_Shdr info{};
  info.sh_name = 1;
  info.sh_type = SHT_PROGBITS;
  info.sh_addr = kBase + data_at;
  info.sh_offset = data_at;
  info.sh_size = size;
  put(file, shdrs_at + sizeof(Elf64_Shdr), info);
  Elf64_Shdr names{};
  names.sh_name = 15;
  names.sh_type = SHT_STRTAB;
  names.sh_offset = names_at;
  names.sh_size = sizeof(kNames);
  put(file, shdrs_at + 2 * sizeof(Elf64_Shdr), names);

  auto elf = sonde::symbols::ElfFile::parse(file);
  if (!elf.ok()) __builtin_trap();  // the wrapper itself is always a valid ELF
  auto version = sonde::symbolize::go_build_version(*elf);
  if (version.ok()) {
    (void)sonde::symbolize::go_register_abi(sonde::symbols::Machine::kX86_64, *version);
  }
  return 0;
}
