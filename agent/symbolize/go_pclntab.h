// GoPclntab: address -> Go function, file and line from a binary's `.gopclntab`, the table the Go
// runtime itself uses for tracebacks (present even in stripped binaries).
//
// Reads the Go 1.2 (magic 0xfffffffb), 1.16 (0xfffffffa), 1.18 (0xfffffff0) and 1.20+
// (0xfffffff1) layouts in either byte order. The object does not own the bytes: it is a view over
// the mapped table (and optionally over the region holding the functions' funcdata), which must
// outlive it. Parsing checks the header and that every table it points to lies inside the span;
// lookups bounds-check every offset they follow, so corrupt tables yield "not found", never a
// crash. Lookups allocate nothing: names and files are string_views into the table. Parsing
// builds a checkpoint index (761 KiB for the 16.6 MB Go 1.19 compiler, index_bytes()) so a lookup
// decodes a bounded number of pc-table steps. Immutable after parse; safe to use from several
// threads.
//
// Bounded work (agent/symbols/limits.h): at most kMaxPclntabBytes of table are read and at most
// kMaxGoFunctions functions accepted — beyond, parse() returns the "too large to instrument"
// verdict (symbols::is_too_large()); the index costs at most 0.75 bytes per table byte plus 24
// bytes per function, and find_pclntab_by_magic() scans at most kMaxMagicScanBytes.
//
// Inlined frames come from the function's inline tree (FUNCDATA_InlTree, PCDATA_InlTreeIndex),
// available for the 1.16+ layouts when the caller supplies the memory that holds the inline
// trees (`go:func.*`, located through the module data for stripped binaries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sonde::symbolize {

enum class GoPclntabLayout : uint8_t { kGo12, kGo116, kGo118, kGo120 };

// Bytes of the binary at a virtual address, e.g. a mapped section and its sh_addr.
struct GoMemoryRegion {
  std::span<const uint8_t> bytes;
  uint64_t vaddr = 0;
};

struct GoPclntabOptions {
  // Address the functab's 1.18+ entry offsets are relative to. 0 takes the header's textStart,
  // which is right for executables; pass runtime.text (the .text address) when they differ.
  uint64_t text_start = 0;
  // Where inline trees can be read: for 1.18+ funcdata are offsets from `gofunc` (the
  // `go:func.*` / `go.func.*` symbol, or moduledata.gofunc); for 1.16 they are absolute
  // addresses. Without a region lookups still work, they just report no inlined frames.
  GoMemoryRegion funcdata;
  uint64_t gofunc = 0;
  // Build the checkpoint index that bounds the pc-table walk of a lookup (see index_bytes()).
  // Costs one pass over the tables at parse; off only for throwaway parses.
  bool build_index = true;
};

// One source frame. Views point into the table's bytes.
struct GoFrame {
  std::string_view function;
  std::string_view file;  // empty when the table has no file for the pc
  int32_t line = 0;       // 0 when unknown
  uint64_t entry = 0;     // entry address of the physical (outermost) function
  bool inlined = false;   // true for frames expanded from the inline tree
};

class GoPclntab {
 public:
  // Validates the header and the table extents. Errors name what is wrong.
  static Result<GoPclntab> parse(std::span<const uint8_t> table,
                                 const GoPclntabOptions& options = {});

  // The physical function containing pc, with the file and line of the innermost source
  // position at pc (what `go tool addr2line` and debug/gosym print). nullopt outside the table.
  std::optional<GoFrame> lookup(uint64_t pc) const;

  // All frames at pc, innermost (most deeply inlined) first, the physical function last; fills
  // at most out.size() frames and returns how many were written (0 if pc is not in the table).
  // When `out` is too small the outermost frames are dropped.
  size_t lookup_frames(uint64_t pc, std::span<GoFrame> out) const;

  GoPclntabLayout layout() const { return layout_; }
  // The 1.18+ header's textStart word as written in the file: runtime.text for Go 1.18-1.25,
  // 0 from Go 1.26 on (the runtime takes moduledata.text instead). 0 for older layouts.
  uint64_t header_text_start() const { return header_text_start_; }
  // What function entries are relative to (options.text_start, else the header's word).
  uint64_t text_start() const { return text_start_; }
  uint32_t function_count() const { return nfunc_; }
  // [min_pc, max_pc): the address range the function table covers.
  uint64_t min_pc() const;
  uint64_t max_pc() const;
  // Heap bytes of the checkpoint index (0 without one).
  size_t index_bytes() const;
  // Entry address and name of function number `index` < function_count() (for tests, tools).
  std::optional<GoFrame> function_at(uint32_t index) const;

  // The function named `name` (e.g. "crypto/tls.(*Conn).Read"): [entry, end), end being the
  // next function's entry (alignment padding included). A linear scan over the function table
  // without allocation, for finding probe targets in stripped binaries. nullopt when absent.
  struct FunctionRange {
    uint64_t entry = 0;
    uint64_t end = 0;
  };
  std::optional<FunctionRange> find_function(std::string_view name) const;

 private:
  struct Func;  // a validated view of one runtime._func record
  // Decoder state after a step of a pc-value table: pc relative to the function entry, value,
  // and the table position (from pctab_) of the next step.
  struct Checkpoint {
    uint32_t pc;
    uint32_t value;
    uint32_t pos;
  };
  enum class TableKind : uint8_t { kFile, kLine, kInline };
  static constexpr size_t kTableKinds = 3;
  struct Range {
    uint32_t first = 0;  // a table's checkpoints: index->checkpoints[first, first + count)
    uint32_t count = 0;
  };
  struct Index {
    std::vector<Range> ranges;  // kTableKinds per function, in functab order
    std::vector<Checkpoint> checkpoints;
    uint64_t bucket_base = 0;
    std::vector<uint32_t> buckets;  // first function overlapping each 4 KiB from bucket_base
  };
  GoPclntab() = default;

  void build_index();
  const Checkpoint* checkpoint_for(uint32_t func, TableKind kind, uint64_t pc_delta) const;
  bool step(size_t* pos, uint32_t* value, uint64_t* cur, bool first) const;
  uint64_t read_uint(size_t offset, size_t width, bool* ok) const;
  uint64_t functab_pc(uint32_t index, bool* ok) const;
  std::optional<Func> func_at(uint32_t index) const;
  std::optional<uint32_t> find_index(uint64_t pc) const;
  int32_t pcvalue(const Func& f, TableKind kind, uint32_t table_offset, uint64_t pc) const;
  std::string_view c_string(size_t base, size_t end, uint64_t offset) const;
  std::string_view func_name(uint64_t nameoff) const;
  std::string_view file_name(const Func& f, int32_t file_index) const;
  GoFrame frame_at(const Func& f, uint64_t pc, std::string_view function) const;

  std::span<const uint8_t> data_;
  GoPclntabOptions options_;
  GoPclntabLayout layout_ = GoPclntabLayout::kGo120;
  bool big_endian_ = false;
  uint8_t quantum_ = 1;
  uint8_t ptr_size_ = 8;
  uint32_t nfunc_ = 0;
  uint32_t nfiles_ = 0;
  uint64_t text_start_ = 0;
  uint64_t header_text_start_ = 0;
  // Offsets into data_, each checked to lie inside it at parse time.
  size_t funcname_ = 0;
  size_t cutab_ = 0;
  size_t filetab_ = 0;
  size_t pctab_ = 0;
  size_t funcdata_ = 0;
  size_t functab_ = 0;
  size_t functab_field_ = 4;
  // Shared so that copies of a parsed table (it is a cheap view) share one index.
  std::shared_ptr<const Index> index_;
};

// Offset of the first plausible pclntab header in `bytes` (magic, zero pad, quantum, pointer
// size, and a header that parses), for binaries whose section headers are gone. Scans once.
std::optional<size_t> find_pclntab_by_magic(std::span<const uint8_t> bytes);

// What the runtime's module data tells about a binary: found by scanning a data region (the
// module data lives in .noptrdata, in its own .go.module section from Go 1.26) for a pointer to
// the pclntab header, confirmed by the function-name table pointer that follows it and by
// minpc = text + the first function's offset. Gives the text start that function entries are
// relative to (Go 1.26+ writes 0 in the table's header) and the 1.18+ `gofunc` of stripped
// binaries (only for the layouts whose word for it is known; check it lies in read-only data).
struct GoModuleData {
  uint64_t vaddr = 0;  // of the moduledata record
  uint64_t text = 0;
  uint64_t gofunc = 0;
};
std::optional<GoModuleData> find_go_moduledata(std::span<const uint8_t> table, uint64_t table_vaddr,
                                               GoMemoryRegion data);

}  // namespace sonde::symbolize
