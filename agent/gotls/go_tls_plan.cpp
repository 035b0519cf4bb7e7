#include "agent/gotls/go_tls_plan.h"

#include <elf.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <utility>

#include "agent/gotls/probe_sites.h"
#include "agent/symbolize/go_binary.h"
#include "agent/symbols/elf_file.h"

namespace sonde::agent {
namespace {

enum NameIndex { kWrite = 0, kRead = 1 };

// A function's address and size in the ELF file.
struct Function {
  uint64_t address = 0;
  uint64_t size = 0;
};

// A function's code read from the file with pread, never through a mapping: the kernel writes
// the breakpoint of every uprobe on a file into each mapping of it that may execute, the
// agent's own read-only one included, so a mapping shows another tracer's int3s (another
// agent, perf) where the instructions are, and decoding them would pick wrong sites.
// Read through the descriptor that was identified, so the bytes are that file's.
Result<std::vector<uint8_t>> read_code(const symbols::OpenBinary& binary, uint64_t offset,
                                       uint64_t size) {
  std::vector<uint8_t> code(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n =
        pread(binary.fd(), code.data() + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read " + binary.path(), errno);
    if (n == 0) return Error("short read of " + binary.path());
    done += static_cast<size_t>(n);
  }
  return code;
}

// Without either symbol only a Go binary can be a TLS user, through its function table. Not told
// by the build-id note alone: a binary linked by the system linker (cgo) carries a GNU one too,
// and stripping can remove Go's.
bool may_hold_go_functions(const symbols::ElfFile& elf) {
  return elf.section_count() == 0 || symbolize::looks_like_go(elf);
}

std::optional<Function> in_function_table(const symbolize::GoBinary& go, const std::string& name) {
  auto f = go.pclntab().find_function(name);
  if (!f) return std::nullopt;
  return Function{f->entry, f->end - f->entry};
}

}  // namespace

const std::vector<std::string>& go_tls_symbol_names() {
  static const std::vector<std::string> kNames = {"crypto/tls.(*Conn).Write",
                                                  "crypto/tls.(*Conn).Read"};
  return kNames;
}

size_t GoTlsPlan::sites() const {
  size_t n = 0;
  for (const auto& p : programs) n += p.sites.size();
  return n;
}

bool may_use_go_tls(const symbols::OpenBinary& binary,
                    const std::vector<symbols::ProbeTarget>& targets) {
  if (targets[kWrite].found || targets[kRead].found) return true;
  auto elf = symbols::ElfFile::parse(binary.bytes());
  return elf.ok() && may_hold_go_functions(*elf);
}

GoTlsPlan plan_go_tls(const symbols::OpenBinary& binary, const std::string& exe,
                      const std::vector<symbols::ProbeTarget>& t, bool can_perform_ret) {
  GoTlsPlan plan;
  GoTlsVerdict& v = plan.verdict;
  v.path = exe;
  v.build_id = binary.identity().digest_hex();
  auto elf = symbols::ElfFile::parse(binary.bytes());
  if (!elf.ok()) {
    v.reason = "not a Go binary we can read: " + elf.error().message();
    return plan;
  }
  // Where the two functions are: the symbol table, else (stripped) the Go function table.
  std::optional<Function> write, read;
  if (t[kWrite].found) write = Function{t[kWrite].address, t[kWrite].size};
  if (t[kRead].found) read = Function{t[kRead].address, t[kRead].size};
  plan.found_in = "symbol table";
  // The Go reader, for the version and (stripped) the function table; opened at most once.
  std::unique_ptr<symbolize::GoBinary> go;
  std::string go_error;
  auto open_go = [&] {
    if (go || !go_error.empty()) return;
    symbolize::GoBinaryOptions options;
    options.build_index = false;  // two name lookups, no pc lookups
    options.inline_trees = false;
    auto opened = symbolize::GoBinary::from_bytes(binary.bytes(), options);
    if (opened.ok()) {
      go = std::move(opened).value();
    } else {
      go_error = opened.error().message();
    }
  };
  if (!write && !read && !may_hold_go_functions(*elf)) {
    v.reported = false;
    v.reason = "does not use crypto/tls (not a Go binary)";
    return plan;
  }
  if (!write && !read && !elf->find_section(".symtab")) {
    v.stripped = true;
    open_go();
    if (!go) {
      v.reason = "stripped Go binary without a readable .gopclntab: " + go_error;
      return plan;
    }
    write = in_function_table(*go, go_tls_symbol_names()[kWrite]);
    read = in_function_table(*go, go_tls_symbol_names()[kRead]);
    plan.found_in = std::string("function table (text start from ") +
                    symbolize::text_from_name(go->text_from()) + ")";
  }
  if (write) plan.write_address = write->address, plan.write_size = write->size;
  if (read) plan.read_address = read->address, plan.read_size = read->size;
  if (!write && !read) {
    v.reported = false;
    v.reason = "does not use crypto/tls";
    return plan;
  }
  // The version: .go.buildinfo, else what the function table's layout implies.
  symbolize::GoVersion version;
  if (auto built = symbolize::go_build_version(*elf); built.ok()) {
    version = std::move(built).value();
  } else {
    open_go();
    if (!go) {
      v.reason = "Go binary without .go.buildinfo or a readable .gopclntab (" +
                 built.error().message() + "; " + go_error + ")";
      return plan;
    }
    version = go->version();
    if (!symbolize::go_register_abi(elf->machine(), version)) {
      v.reason = version.text +
                 " may pass arguments on the stack (register ABI from Go 1.17 on amd64, 1.18 on "
                 "arm64; nothing left in the file tells which release built it)";
      return plan;
    }
  }
  if (!symbolize::go_register_abi(elf->machine(), version)) {
    v.reason =
        version.text + " passes arguments on the stack (needs Go 1.17+ on amd64, 1.18+ on arm64)";
    return plan;
  }
  if (!write || !read) {
    v.reason = "only one of (*Conn).Write and (*Conn).Read found";
    return plan;
  }
  auto decode = [&](const Function& f) -> Result<std::pair<uint64_t, GoProbeSites>> {
    ASSIGN_OR_RETURN(uint64_t offset, elf->file_offset_of(f.address));
    if (auto in_segment = elf->code_at(f.address, f.size); !in_segment.ok()) {
      return in_segment.error();  // not inside the executable segment
    }
    ASSIGN_OR_RETURN(auto code, read_code(binary, offset, f.size));
    return std::make_pair(offset, find_go_probe_sites(elf->machine(), code, f.address));
  };
  auto w = decode(*write);
  auto r = decode(*read);
  if (!w.ok() || !r.ok()) {
    v.reason = "crypto/tls code not readable: " + (w.ok() ? r.error() : w.error()).message();
    return plan;
  }
  const auto& [write_offset, ws] = *w;
  const auto& [read_offset, rs] = *r;
  if (rs.return_status != symbols::ReturnSiteStatus::kFound) {
    v.reason = std::string("(*Conn).Read has no return site to probe (") +
               symbols::return_site_status_name(rs.return_status) + ")";
    return plan;
  }
  v.instrumentable = true;
  v.reason = version.text;
  const bool checked = ws.entry_at_stack_check && rs.entry_at_stack_check;
  v.entry_probe = checked ? "emulated-jump" : "single-step";
  plan.programs.push_back(
      {checked ? TlsCounters::Program::kWriteChecked : TlsCounters::Program::kWriteEnter,
       "gotls/write",
       {{write_offset + (checked ? ws.entry_offset : 0), 0}}});
  plan.programs.push_back(
      {checked ? TlsCounters::Program::kReadChecked : TlsCounters::Program::kReadEnter,
       "gotls/read",
       {{read_offset + (checked ? rs.entry_offset : 0), 0}}});
  // The ret-performing program knows its site by address (its guard), which is the same in
  // every process only in a position-dependent executable.
  const bool perform_ret = rs.returns_are_plain_ret && can_perform_ret && elf->type() == ET_EXEC;
  v.return_probe = perform_ret ? "bpf-ret" : "single-step";
  GoTlsProgramSites returns{
      perform_ret ? TlsCounters::Program::kReadReturnRet : TlsCounters::Program::kReadReturn,
      "gotls/read_return",
      {}};
  for (uint32_t ret : rs.returns) {
    // The guard of tls_read_return_ret, its cookie: it writes registers only while the
    // instruction pointer is this address.
    returns.sites.push_back({read_offset + ret, perform_ret ? read->address + ret : 0});
  }
  plan.programs.push_back(std::move(returns));
  return plan;
}

}  // namespace sonde::agent
