#include "agent/nodejs/wait_entry_site.h"

#include <Zydis/Zydis.h>

namespace sonde::agent {
namespace {

bool is_rdi_or_rsp(ZydisRegister reg) {
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  return full == ZYDIS_REGISTER_RDI || full == ZYDIS_REGISTER_RSP;
}

// The instruction writes no memory, and neither rdi nor rsp (hidden operands included: push,
// pop and call write rsp implicitly).
bool keeps_entry_state(const ZydisDecodedInstruction& insn, const ZydisDecodedOperand* ops) {
  for (uint8_t i = 0; i < insn.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if ((op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) == 0) continue;
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) return false;
    if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && is_rdi_or_rsp(op.reg.value)) return false;
  }
  return true;
}

}  // namespace

uint32_t x86_64_wait_probe_offset(std::span<const uint8_t> code) {
  ZydisDecoder decoder;
  if (!ZYAN_SUCCESS(ZydisDecoderInit(&decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
    return 0;
  }
  size_t pos = 0;
  for (int i = 0; i < kMaxWaitSitePrefix && pos < code.size(); ++i) {
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(
            ZydisDecoderDecodeFull(&decoder, code.data() + pos, code.size() - pos, &insn, ops))) {
      return 0;
    }
    const bool relative = (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0;
    switch (insn.meta.category) {
      case ZYDIS_CATEGORY_COND_BR:
      case ZYDIS_CATEGORY_UNCOND_BR:
      case ZYDIS_CATEGORY_CALL:
        // Emulated when relative; an indirect one is stepped, and the entry is as good.
        return relative ? static_cast<uint32_t>(pos) : 0;
      case ZYDIS_CATEGORY_RET:
      case ZYDIS_CATEGORY_SYSCALL:
      case ZYDIS_CATEGORY_SYSTEM:
      case ZYDIS_CATEGORY_INTERRUPT: return 0;
      default: break;
    }
    if (!keeps_entry_state(insn, ops)) return 0;
    pos += insn.length;
  }
  return 0;
}

}  // namespace sonde::agent
