// PoolSymbols: where libuv's thread-pool state lives in a Node.js binary, and the verdict on
// whether it can be read there.
//
// libuv's src/threadpool.c keeps the one pool of a process in file-scope statics (unchanged in
// their meaning from libuv 1.21, Node 10, to today's 1.x):
//   nthreads              unsigned: the pool's threads; 0 until the first task starts the pool
//   idle_threads          unsigned: threads waiting in uv_cond_wait for work (under `mutex`)
//   wq                    queue head {next, prev}: tasks posted and not yet taken by a thread
//   slow_io_pending_wq    queue head: "slow I/O" tasks (getaddrinfo, ...) waiting for their turn
//   run_slow_work_message a static queue node that sits IN wq while slow I/O work waits
//   exit_message          a static queue node posted to wq at shutdown
// Official Node.js builds and Debian's keep them as LOCAL data symbols in .symtab (libuv linked
// statically), each name defined once. A queue head and node is two pointers (QUEUE is void*[2]
// before libuv 1.45, struct uv__queue after: the same bytes).
//
// The verdict never guesses: every symbol present, defined once (a second definition at
// another address is `ambiguous`), and of the size libuv gives it; otherwise nothing is read.
//
// Thread-safety: free functions, no state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "agent/discovery/proc_reader.h"
#include "agent/symbols/elf_file.h"
#include "agent/symbols/symbol_resolver.h"
#include "common/result.h"

namespace sonde::agent::threadpool {

// Addresses of libuv's thread-pool statics: link-time (st_value) or in a process (relocated).
struct PoolAddresses {
  uint64_t nthreads = 0;
  uint64_t idle_threads = 0;
  uint64_t wq = 0;
  uint64_t slow_io_pending_wq = 0;
  uint64_t run_slow_work_message = 0;
  uint64_t exit_message = 0;

  PoolAddresses relocated(uint64_t bias) const {
    return {nthreads + bias,           idle_threads + bias,          wq + bias,
            slow_io_pending_wq + bias, run_slow_work_message + bias, exit_message + bias};
  }
};

// What a binary's symbols allow. Names are the label values of
// sonde_agent_nodejs_threadpool_binaries{verdict}.
enum class Verdict {
  kMeasured,          // every symbol found once, with libuv's sizes
  kSymbolsMissing,    // a symbol is absent (a stripped .symtab, a libuv linked dynamically)
  kSymbolsAmbiguous,  // a name defined twice at different addresses: which one is libuv's?
  kLayoutMismatch,    // a symbol's size is not libuv's: another variable of that name
  kUnreadable,        // the binary or the process's mappings could not be read
};
const char* verdict_name(Verdict verdict);

// The names to resolve, in this order: napi_module_register (Node.js is recognised by it, as
// the event-loop feature does), then the pool's statics.
const std::vector<std::string>& symbol_names();

struct SymbolCheck {
  bool is_node = false;  // napi_module_register found
  Verdict verdict = Verdict::kSymbolsMissing;
  std::string detail;       // which names, for anything but kMeasured ("wq, nthreads")
  PoolAddresses link_time;  // kMeasured only
};
// The verdict on `targets`, resolved for symbol_names() in its order.
SymbolCheck check_symbols(std::span<const symbols::ProbeTarget> targets);

// What to add to a link-time address of `elf` (the executable of pid) to get its address in the
// process: 0 for a non-PIE executable (ET_EXEC), the load base from /proc/<pid>/maps minus the
// lowest PT_LOAD page for a PIE (ET_DYN). Errors carry ENOENT/ESRCH when the process is gone.
Result<uint64_t> load_bias(const ProcReader& proc, pid_t pid, const symbols::ElfFile& elf);

}  // namespace sonde::agent::threadpool
