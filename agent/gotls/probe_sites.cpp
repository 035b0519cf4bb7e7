#include "agent/gotls/probe_sites.h"

#include <Zydis/Zydis.h>

#include <algorithm>

namespace sonde::agent {
namespace {

// The stack bound a goroutine's g holds at offset 16 (runtime.g.stackguard0), read through R14.
bool is_stackguard_operand(const ZydisDecodedOperand& op) {
  return op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_R14 &&
         op.mem.index == ZYDIS_REGISTER_NONE && op.mem.disp.has_displacement &&
         op.mem.disp.value == 16 && op.mem.segment == ZYDIS_REGISTER_DS;
}

bool is_reg(const ZydisDecodedOperand& op, ZydisRegister r) {
  return op.type == ZYDIS_OPERAND_TYPE_REGISTER && op.reg.value == r;
}

// Offset of the `jbe` that ends Go's stack-bound check at the start of code, if the function
// starts with exactly `[lea -N(%rsp),%r12;] cmp 0x10(%r14),%rsp|%r12; jbe <in function>`.
std::optional<uint32_t> stack_check_jump(std::span<const uint8_t> code) {
  ZydisDecoder decoder;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
    return std::nullopt;
  }
  size_t pos = 0;
  ZydisRegister compared = ZYDIS_REGISTER_RSP;
  // At most: lea, cmp, jbe.
  for (int i = 0; i < 3 && pos < code.size(); ++i) {
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(
            ZydisDecoderDecodeFull(&decoder, code.data() + pos, code.size() - pos, &insn, ops))) {
      return std::nullopt;
    }
    if (i == 0 && insn.mnemonic == ZYDIS_MNEMONIC_LEA) {
      // lea -N(%rsp),%r12: the frame's lowest address, compared below. Writes only R12.
      if (insn.operand_count_visible != 2 || !is_reg(ops[0], ZYDIS_REGISTER_R12) ||
          ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY || ops[1].mem.base != ZYDIS_REGISTER_RSP ||
          ops[1].mem.index != ZYDIS_REGISTER_NONE) {
        return std::nullopt;
      }
      compared = ZYDIS_REGISTER_R12;
    } else if (insn.mnemonic == ZYDIS_MNEMONIC_CMP) {
      // cmp %rsp|%r12, 0x10(%r14) in Intel order (flags of reg - guard, so jbe means "at or
      // below the guard"): reads both, writes only the flags.
      if (insn.operand_count_visible != 2 || !is_reg(ops[0], compared) ||
          !is_stackguard_operand(ops[1])) {
        return std::nullopt;
      }
      // The next instruction must be the jump.
      pos += insn.length;
      if (!ZYAN_SUCCESS(
              ZydisDecoderDecodeFull(&decoder, code.data() + pos, code.size() - pos, &insn, ops))) {
        return std::nullopt;
      }
      // jbe (CF or ZF): what the BPF program tests. A relative target inside the function
      // (Go puts the morestack call at the function's end).
      if (insn.mnemonic != ZYDIS_MNEMONIC_JBE ||
          (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) == 0 || !insn.raw.imm[0].is_relative) {
        return std::nullopt;
      }
      const int64_t target = static_cast<int64_t>(pos + insn.length) + insn.raw.imm[0].value.s;
      if (target <= static_cast<int64_t>(pos) || target >= static_cast<int64_t>(code.size())) {
        return std::nullopt;
      }
      return static_cast<uint32_t>(pos);
    } else {
      return std::nullopt;
    }
    pos += insn.length;
  }
  return std::nullopt;
}

}  // namespace

GoProbeSites find_go_probe_sites(symbols::Machine machine, std::span<const uint8_t> code,
                                 uint64_t address) {
  GoProbeSites out;
  auto rets = symbols::find_return_sites(machine, code, address);
  out.return_status = rets.status;
  out.returns = std::move(rets.returns);
  if (machine != symbols::Machine::kX86_64) return out;
  if (auto jump = stack_check_jump(code)) {
    out.entry_offset = *jump;
    out.entry_at_stack_check = true;
  }
  // Each offset starts a decoded RET; its first byte tells the form (a prefix or C2/CA/CB
  // would show there).
  out.returns_are_plain_ret =
      !out.returns.empty() && std::all_of(out.returns.begin(), out.returns.end(),
                                          [&](uint32_t off) { return code[off] == 0xC3; });
  return out;
}

}  // namespace sonde::agent
