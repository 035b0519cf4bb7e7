#include "agent/symbols/return_sites.h"

#include <Zydis/Zydis.h>

#include <cstring>

namespace sonde::symbols {
namespace {

// The verdict for a function whose exits do not fit the caps: nothing kept.
ReturnSites too_large() {
  ReturnSites out;
  out.status = ReturnSiteStatus::kTooLarge;
  return out;
}

bool over_caps(const ReturnSites& sites) {
  return sites.returns.size() > kMaxReturnSites || sites.exit_jumps.size() > kMaxReturnSites;
}

ReturnSites decode_x86_64(std::span<const uint8_t> code, uint64_t address) {
  ReturnSites out;
  ZydisDecoder decoder;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
    out.status = ReturnSiteStatus::kDecodeError;
    return out;
  }
  const uint64_t end = address + code.size();
  size_t pos = 0;
  while (pos < code.size()) {
    ZydisDecodedInstruction insn;
    ZydisDecoderContext context;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, &context, code.data() + pos,
                                                    code.size() - pos, &insn))) {
      out.status = ReturnSiteStatus::kDecodeError;
      out.returns.clear();
      out.exit_jumps.clear();
      return out;
    }
    const auto offset = static_cast<uint32_t>(pos);
    switch (insn.meta.category) {
      case ZYDIS_CATEGORY_RET: out.returns.push_back(offset); break;
      case ZYDIS_CATEGORY_UNCOND_BR:
      case ZYDIS_CATEGORY_COND_BR: {
        // Only the immediate of a relative branch names its target; everything else
        // (register, memory, far pointer) is an indirect jump and may leave.
        bool leaves = true;
        if ((insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0 && insn.raw.imm[0].is_relative) {
          const uint64_t target =
              address + pos + insn.length + static_cast<uint64_t>(insn.raw.imm[0].value.s);
          leaves = target < address || target >= end;
        }
        if (leaves) out.exit_jumps.push_back(offset);
        break;
      }
      default: break;
    }
    if (over_caps(out)) return too_large();
    pos += insn.length;
  }
  out.status = !out.returns.empty()      ? ReturnSiteStatus::kFound
               : !out.exit_jumps.empty() ? ReturnSiteStatus::kTailCallOnly
                                         : ReturnSiteStatus::kNoExit;
  return out;
}

// The low `bits` bits of value as a signed count of 4-byte instructions, in bytes.
int64_t sign_extend(uint32_t value, int bits) {
  const int shift = 32 - bits;
  return static_cast<int64_t>(static_cast<int32_t>(value << shift) >> shift) * 4;
}

ReturnSites decode_aarch64(std::span<const uint8_t> code, uint64_t address) {
  ReturnSites out;
  if (code.size() % 4 != 0 || address % 4 != 0) {
    out.status = ReturnSiteStatus::kDecodeError;
    return out;
  }
  const uint64_t end = address + code.size();
  for (size_t pos = 0; pos < code.size(); pos += 4) {
    uint32_t insn;
    std::memcpy(&insn, code.data() + pos, 4);  // aarch64 ELF code is little-endian
    const auto offset = static_cast<uint32_t>(pos);
    // RET Xn, RETAA, RETAB (ARM ARM C6.2: "Unconditional branch (register)" class).
    if ((insn & 0xfffffc1f) == 0xd65f0000 || insn == 0xd65f0bff || insn == 0xd65f0fff) {
      out.returns.push_back(offset);
      if (over_caps(out)) return too_large();
      continue;
    }
    // BR Xn and the pointer-authenticated BRAA/BRAB/BRAAZ/BRABZ: indirect, may leave.
    if ((insn & 0xfffffc1f) == 0xd61f0000 || (insn & 0xfefff800) == 0xd61f0800) {
      out.exit_jumps.push_back(offset);
      if (over_caps(out)) return too_large();
      continue;
    }
    // Relative branches (B imm26; B.cond, CBZ/CBNZ imm19; TBZ/TBNZ imm14) leave when their
    // target is outside the function.
    int64_t displacement = 0;
    bool branch = true;
    if ((insn & 0xfc000000) == 0x14000000) {
      displacement = sign_extend(insn, 26);
    } else if ((insn & 0xff000010) == 0x54000000 || (insn & 0x7e000000) == 0x34000000) {
      displacement = sign_extend(insn >> 5, 19);
    } else if ((insn & 0x7e000000) == 0x36000000) {
      displacement = sign_extend(insn >> 5, 14);
    } else {
      branch = false;
    }
    if (branch) {
      const uint64_t target = address + pos + static_cast<uint64_t>(displacement);
      if (target < address || target >= end) out.exit_jumps.push_back(offset);
      if (over_caps(out)) return too_large();
    }
  }
  out.status = !out.returns.empty()      ? ReturnSiteStatus::kFound
               : !out.exit_jumps.empty() ? ReturnSiteStatus::kTailCallOnly
                                         : ReturnSiteStatus::kNoExit;
  return out;
}

}  // namespace

const char* return_site_status_name(ReturnSiteStatus status) {
  switch (status) {
    case ReturnSiteStatus::kFound: return "found";
    case ReturnSiteStatus::kTailCallOnly: return "tail-call-only";
    case ReturnSiteStatus::kNoExit: return "no-exit";
    case ReturnSiteStatus::kDecodeError: return "decode-error";
    case ReturnSiteStatus::kUnsupportedMachine: return "unsupported-machine";
    case ReturnSiteStatus::kNotCode: return "not-code";
    case ReturnSiteStatus::kTooLarge: return "too-large";
  }
  return "unknown";
}

ReturnSites find_return_sites(Machine machine, std::span<const uint8_t> code, uint64_t address) {
  if (code.size() > kMaxDecodedFunctionBytes) return too_large();
  switch (machine) {
    case Machine::kX86_64: return decode_x86_64(code, address);
    case Machine::kAarch64: return decode_aarch64(code, address);
    case Machine::kOther: break;
  }
  ReturnSites out;
  out.status = ReturnSiteStatus::kUnsupportedMachine;
  return out;
}

}  // namespace sonde::symbols
