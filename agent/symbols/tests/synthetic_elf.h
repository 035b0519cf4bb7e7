// SyntheticElf: writes a minimal x86-64 ELF executable — one executable PT_LOAD with .text,
// .symtab, .strtab and .shstrtab — whose sizes a test chooses freely. Files are written with
// pwrite at their final offsets, so a gigabyte of .text or a hundred megabytes of symbol table
// that the test leaves unwritten is a hole: sparse on disk, read as zeros, created instantly.
// The symbol and string tables come after .text, so truncating the file to its first pages
// leaves them unbacked (what the truncation tests need).
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/unique_fd.h"

namespace sonde::symbols::testing {

class SyntheticElf {
 public:
  static constexpr uint64_t kTextOffset = 0x1000;
  static constexpr uint64_t kTextAddr = 0x401000;

  // A function symbol at kTextAddr + offset.
  struct Function {
    std::string name;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  // Bytes written into .text at an offset from its start.
  struct Chunk {
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
  };

  uint64_t text_size = 0x1000;
  std::vector<Function> functions;
  std::vector<Chunk> text;
  // When larger than the real table, .symtab claims this many bytes (the rest is a hole of
  // zero entries).
  uint64_t claimed_symtab_bytes = 0;
  uint16_t machine = EM_X86_64;

  // Writes the file; aborts the test binary on an I/O error (a broken fixture, not a result).
  void write(const std::string& path) const {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755));
    if (!fd.valid()) std::abort();
    for (const Chunk& c : text) put(fd.get(), kTextOffset + c.offset, c.bytes);

    std::vector<uint8_t> strtab(1, 0);
    std::vector<uint8_t> symtab(sizeof(Elf64_Sym), 0);
    for (const Function& f : functions) {
      Elf64_Sym sym{};
      sym.st_name = static_cast<uint32_t>(strtab.size());
      sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
      sym.st_shndx = 1;
      sym.st_value = kTextAddr + f.offset;
      sym.st_size = f.size;
      append(symtab, sym);
      strtab.insert(strtab.end(), f.name.begin(), f.name.end());
      strtab.push_back(0);
    }
    const std::string names = std::string("\0.text\0.symtab\0.strtab\0.shstrtab\0", 33);
    const uint64_t symtab_at = align(kTextOffset + text_size, 0x1000);
    const uint64_t symtab_bytes = std::max<uint64_t>(symtab.size(), claimed_symtab_bytes);
    const uint64_t strtab_at = align(symtab_at + symtab_bytes, 8);
    const uint64_t names_at = strtab_at + strtab.size();
    const uint64_t shdrs_at = align(names_at + names.size(), 8);
    put(fd.get(), symtab_at, symtab);
    put(fd.get(), strtab_at, strtab);
    put(fd.get(), names_at, std::vector<uint8_t>(names.begin(), names.end()));

    std::vector<uint8_t> shdrs(sizeof(Elf64_Shdr), 0);
    append(shdrs, section(1, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, kTextAddr, kTextOffset,
                          text_size, 0, 0));
    append(shdrs, section(7, SHT_SYMTAB, 0, 0, symtab_at, symtab_bytes, 3, sizeof(Elf64_Sym)));
    append(shdrs, section(15, SHT_STRTAB, 0, 0, strtab_at, strtab.size(), 0, 0));
    append(shdrs, section(23, SHT_STRTAB, 0, 0, names_at, names.size(), 0, 0));
    put(fd.get(), shdrs_at, shdrs);

    Elf64_Ehdr ehdr{};
    std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
    ehdr.e_ident[EI_CLASS] = ELFCLASS64;
    ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
    ehdr.e_ident[EI_VERSION] = EV_CURRENT;
    ehdr.e_type = ET_EXEC;
    ehdr.e_machine = machine;
    ehdr.e_version = EV_CURRENT;
    ehdr.e_entry = kTextAddr;
    ehdr.e_phoff = sizeof(Elf64_Ehdr);
    ehdr.e_shoff = shdrs_at;
    ehdr.e_ehsize = sizeof(Elf64_Ehdr);
    ehdr.e_phentsize = sizeof(Elf64_Phdr);
    ehdr.e_phnum = 1;
    ehdr.e_shentsize = sizeof(Elf64_Shdr);
    ehdr.e_shnum = 5;
    ehdr.e_shstrndx = 4;
    Elf64_Phdr phdr{};
    phdr.p_type = PT_LOAD;
    phdr.p_flags = PF_R | PF_X;
    phdr.p_offset = kTextOffset;
    phdr.p_vaddr = phdr.p_paddr = kTextAddr;
    phdr.p_filesz = phdr.p_memsz = text_size;
    phdr.p_align = 0x1000;
    std::vector<uint8_t> head;
    append(head, ehdr);
    append(head, phdr);
    put(fd.get(), 0, head);
  }

 private:
  static uint64_t align(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

  template <typename T>
  static void append(std::vector<uint8_t>& out, const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
  }

  static Elf64_Shdr section(uint32_t name, uint32_t type, uint64_t flags, uint64_t addr,
                            uint64_t offset, uint64_t size, uint32_t link, uint64_t entsize) {
    Elf64_Shdr s{};
    s.sh_name = name;
    s.sh_type = type;
    s.sh_flags = flags;
    s.sh_addr = addr;
    s.sh_offset = offset;
    s.sh_size = size;
    s.sh_link = link;
    s.sh_addralign = 1;
    s.sh_entsize = entsize;
    return s;
  }

  static void put(int fd, uint64_t offset, const std::vector<uint8_t>& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
};

}  // namespace sonde::symbols::testing
