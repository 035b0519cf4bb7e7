// SPDX-License-Identifier: GPL-2.0
/* Go crypto/tls: requests, bytes and latency from uprobes on (*Conn).Write and (*Conn).Read.
 *
 * Go moves goroutine stacks, so return probes (uretprobes) would corrupt them: Read's returns
 * are probed by uprobes on each RET instruction found by decoding the function. Arguments
 * follow Go's register ABI (amd64 Go >= 1.17: RAX, RBX, RCX, goroutine in R14; arm64 Go >=
 * 1.18: X0-X2, goroutine in X28). A Read is matched to its return by goroutine, not thread.
 *
 * Where the probes sit decides their cost (the kernel emulates a jump, single-steps a `cmp` or
 * a `ret` out of line, ten times slower). Each program comes in the variants the agent picks
 * per binary after decoding the function:
 *   - *_enter: at the function's first instruction (single-stepped);
 *   - *_checked: at the `jbe` of Go's stack-bound check (emulated). When that jump is taken the
 *     function calls morestack and starts over, so the hit is skipped: each call counts once.
 *   - tls_read_return: at a RET (single-stepped);
 *   - tls_read_return_ret: at a RET, and performs the `ret` itself (pops the return address
 *     into the instruction pointer), so the kernel, seeing the instruction pointer moved, skips
 *     the single step. Loads only where uprobe programs may write registers (after Linux 6.18)
 *     and the agent was told to use it (--go-tls-perform-ret): it changes what the workload
 *     executes, and no kernel the agent was tested on accepts it.
 *
 * Processes are counted from their first call, per tgid, without waiting for user space: the
 * probes are per file, and user space attributes a tgid to its container when it learns of
 * it. When `filter_by_cgroup` is set, only processes of the cgroups in `allowed_cgroups` start
 * being counted; user space names a process's cgroup through bpf/kernel/process_cgroup.bpf.c.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gotls.h"
#include "pidns.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#if defined(__TARGET_ARCH_x86)
#define GO_ARG1(ctx) ((ctx)->ax)
#define GO_ARG2(ctx) ((ctx)->bx)
#define GO_ARG3(ctx) ((ctx)->cx)
#define GO_G(ctx) ((ctx)->r14)
/* At a RET of Read: the type word of the error result (nil: no error). */
#define GO_RET_ERR_TYPE(ctx) ((ctx)->bx)
/* Before `jbe morestack`: the jump is taken when CF or ZF is set. */
#define GO_STACK_CHECK_FAILS(ctx) (((ctx)->flags & (0x1 | 0x40)) != 0)
#elif defined(__TARGET_ARCH_arm64)
#define GO_ARG1(ctx) (((struct user_pt_regs*)(ctx))->regs[0])
#define GO_ARG2(ctx) (((struct user_pt_regs*)(ctx))->regs[1])
#define GO_ARG3(ctx) (((struct user_pt_regs*)(ctx))->regs[2])
#define GO_G(ctx) (((struct user_pt_regs*)(ctx))->regs[28])
#define GO_RET_ERR_TYPE(ctx) (((struct user_pt_regs*)(ctx))->regs[1])
/* Before `b.ls morestack`: taken when C is clear or Z is set (PSTATE bits 29 and 30). */
#define GO_STACK_CHECK_FAILS(ctx)                                 \
  ((((struct user_pt_regs*)(ctx))->pstate & (1ULL << 29)) == 0 || \
   (((struct user_pt_regs*)(ctx))->pstate & (1ULL << 30)) != 0)
#else
#error "gotls: unsupported architecture"
#endif

/* Set by user space (cluster mode): count only processes of the cgroups in allowed_cgroups. */
volatile __u32 filter_by_cgroup = 0;

/* Entries of each shared table (enum sonde_gotls_shared_table) one process may hold; set before
 * load (tests lower it). */
const volatile __u32 share[SONDE_GOTLS_SHARED_COUNT] = {
    SONDE_GOTLS_MAX_H2_STATES / SONDE_GOTLS_SHARE_DIVISOR,
    SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR,
    SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR,
    SONDE_GOTLS_MAX_INFLIGHT / SONDE_GOTLS_SHARE_DIVISOR,
    SONDE_GOTLS_H2_EVENTS_SHARE,
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_CGROUPS);
  __type(key, __u64);
  __type(value, __u8);
} allowed_cgroups SEC(".maps");

/* Bytes and probe hits per counted process; a process is counted once it has an entry here. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_tls_process);
} processes SEC(".maps");

/* Finished exchanges per process and kind. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_REQUEST_KEYS);
  __type(key, struct sonde_tls_request_key);
  __type(value, struct sonde_tls_request_stats);
} requests SEC(".maps");

/* Shared-table entries user space deleted for a live process, by tgid (gotls.h). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_gotls_released);
} released SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, SONDE_GOTLS_COUNTER_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

struct goroutine_key {
  __u32 pid;
  __u32 pad;
  __u64 g;
};

struct pending_read {
  __u64 conn;
  __u64 buf;
};

/* Read entry → Read return, by goroutine. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct goroutine_key);
  __type(value, struct pending_read);
} reads SEC(".maps");

struct conn_key {
  __u32 pid;
  __u32 pad;
  __u64 conn;
};

/* The request waiting for its final response on a connection. */
struct exchange {
  __u64 start_ns;
  __u16 direction;
  __u16 method;
  __u32 pad;
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct conn_key);
  __type(value, struct exchange);
} exchanges SEC(".maps");

/* A one-byte Read on a connection, held to be put in front of the next Read's bytes: Go's HTTP
 * server reads one byte in the background while a handler runs (to notice a closed
 * connection), so the next request can arrive as "G" + "ET /...". */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct conn_key);
  __type(value, struct sonde_gotls_carried);
} carried SEC(".maps");

/* HTTP/2 framing of one direction of one connection (see gotls.h). */
struct h2_key {
  __u32 pid;
  __u8 outgoing;
  __u8 pad[3];
  __u64 conn;
};

struct h2_state {
  __u64 seq;       /* of the next event */
  __u32 remaining; /* payload bytes of the current frame not walked yet */
  __u8 forward;    /* the current frame's payload goes to user space */
  __u8 have;       /* bytes of a frame header split across calls, in hdr[] */
  __u8 dead;       /* lost: nothing more is walked */
  __u8 notify;     /* dead, and the LOST event is not sent yet */
  __u8 midway;     /* not followed: marks a connection joined midway, reported once */
  __u8 hdr[16];    /* 9 used; 16 so that hdr[have & 15] needs no other bound */
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_H2_STATES);
  __type(key, struct h2_key);
  __type(value, struct h2_state);
} h2_states SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, SONDE_GOTLS_H2_RINGBUF_BYTES);
} h2_events SEC(".maps");

static const __u64 bucket_bounds_ns[SONDE_GOTLS_BUCKETS] = SONDE_GOTLS_BUCKET_BOUNDS_NS;

static __always_inline void count(__u32 counter) {
  __u64* n = bpf_map_lookup_elem(&counters, &counter);
  if (n) *n += 1;
}

/* Takes n entries (bytes, for the ring buffer) of `table` for the process: false when that would
 * pass its share. The add comes first and is undone past the share, so concurrent threads of
 * one process never take more than the share together (a plain atomic add: no fetch, which
 * needs Linux 5.12). */
static __always_inline bool share_take_n(struct sonde_tls_process* proc, __u32 tgid, __u32 table,
                                         __s64 n) {
  if (table >= SONDE_GOTLS_SHARED_COUNT) return false;
  __s64 freed = 0;
  struct sonde_gotls_released* r = bpf_map_lookup_elem(&released, &tgid);
  if (r) freed = (__s64)r->n[table];
  __sync_fetch_and_add(&proc->held[table], n);
  if (*(volatile __s64*)&proc->held[table] - freed <= (__s64)share[table]) return true;
  __sync_fetch_and_add(&proc->held[table], -n);
  return false;
}

static __always_inline bool share_take(struct sonde_tls_process* proc, __u32 tgid, __u32 table) {
  return share_take_n(proc, tgid, table, 1);
}

static __always_inline void share_refused(struct sonde_tls_process* proc, __u32 table) {
  if (table >= SONDE_GOTLS_SHARED_COUNT) return;
  __sync_fetch_and_add(&proc->over_share[table], 1);
  count(SONDE_GOTLS_SHARE_FIRST + table);
}

/* Deletes key from `table`'s map; the entry is given back to its process's share only if this
 * call deleted it (of two racing deletes, one succeeds). */
static __always_inline void delete_shared(void* map, const void* key,
                                          struct sonde_tls_process* proc, __u32 table) {
  if (bpf_map_delete_elem(map, key) == 0 && table < SONDE_GOTLS_SHARED_COUNT)
    __sync_fetch_and_add(&proc->held[table], -1);
}

/* An insert into a shared table that must not fail silently: a full map or a process over its
 * share is counted. Replacing the process's own entry takes no new entry, so it succeeds past
 * the share. An insert that fails gives back what it took. */
static __always_inline bool insert_shared(void* map, const void* key, const void* value,
                                          struct sonde_tls_process* proc, __u32 tgid, __u32 table,
                                          __u32 full_counter) {
  if (!share_take(proc, tgid, table)) {
    if (bpf_map_update_elem(map, key, value, BPF_EXIST) == 0) return true;
    share_refused(proc, table);
    return false;
  }
  long err = bpf_map_update_elem(map, key, value, BPF_NOEXIST);
  if (err == 0) return true;
  __sync_fetch_and_add(&proc->held[table], -1);
  /* EEXIST: replaced in place; failing that, another thread deleted it meanwhile (rare). */
  if (err == -17 && bpf_map_update_elem(map, key, value, BPF_EXIST) == 0) return true;
  count(full_counter);
  return false;
}

/* The byte counters of tgid (the agent's pid), created on its first call when its cgroup may be
 * counted. */
static __always_inline struct sonde_tls_process* process(__u32 tgid) {
  if (!tgid) return NULL; /* outside the agent's pid namespace */
  struct sonde_tls_process* b = bpf_map_lookup_elem(&processes, &tgid);
  if (b) return b;
  if (filter_by_cgroup) {
    __u64 cgroup = bpf_get_current_cgroup_id();
    if (!bpf_map_lookup_elem(&allowed_cgroups, &cgroup)) return NULL;
  }
  struct sonde_tls_process zero = {};
  long err = bpf_map_update_elem(&processes, &tgid, &zero, BPF_NOEXIST);
  if (err != 0 && err != -17 /* EEXIST: another thread of tgid won */) {
    count(SONDE_GOTLS_FULL_PROCESSES);
    return NULL;
  }
  return bpf_map_lookup_elem(&processes, &tgid);
}

static __always_inline bool starts_with(const char* buf, const char* prefix, int n) {
  for (int i = 0; i < n; i++) {
    if (buf[i] != prefix[i]) return false;
  }
  return true;
}

/* The HTTP method a request starts with, or -1 when the bytes are not an HTTP/1.x request. */
static __always_inline int request_method(const char* p) {
  if (starts_with(p, "GET ", 4)) return SONDE_HTTP_GET;
  if (starts_with(p, "POST ", 5)) return SONDE_HTTP_POST;
  if (starts_with(p, "PUT ", 4)) return SONDE_HTTP_PUT;
  if (starts_with(p, "DELETE ", 7)) return SONDE_HTTP_DELETE;
  if (starts_with(p, "HEAD ", 5)) return SONDE_HTTP_HEAD;
  if (starts_with(p, "PATCH ", 6)) return SONDE_HTTP_PATCH;
  if (starts_with(p, "OPTIONS ", 8)) return SONDE_HTTP_OPTIONS;
  return -1;
}

/* Longest method token recognized as an unlisted method ("PROPFIND", "MKCALENDAR"). */
#define OTHER_METHOD_MAX 11

/* A request line with an unlisted method: a token of capital letters, '-' or '_', a space,
 * then a request target ('/', '*' or an absolute "http..." URI). */
static __always_inline bool other_request(const char* p) {
  int n = -1;
  /* Bounded by OTHER_METHOD_MAX + 1 < SONDE_GOTLS_PEEK - 1: p[n + 1] stays inside p. */
  for (int i = 0; i <= OTHER_METHOD_MAX; i++) {
    char c = p[i];
    if (c == ' ') {
      n = i;
      break;
    }
    if ((c < 'A' || c > 'Z') && c != '-' && c != '_') return false;
  }
  if (n <= 0) return false;
  char t = p[n + 1];
  return t == '/' || t == '*' || t == 'h';
}

/* The status code of "HTTP/1.x NNN", or 0 when the bytes are not an HTTP/1.x response. */
static __always_inline __u16 response_status(const char* p) {
  if (!starts_with(p, "HTTP/1.", 7) || p[8] != ' ') return 0;
  __u16 status = 0;
  for (int i = 9; i < 12; i++) {
    if (p[i] < '0' || p[i] > '9') return 0;
    status = status * 10 + (p[i] - '0');
  }
  return status;
}

static __always_inline bool http2_preface(const char* p) {
  return starts_with(p, "PRI * HTTP/2.0", 14);
}

static __always_inline void count_request(__u32 tgid, __u16 direction, __u16 protocol, __u16 method,
                                          __u16 status, __u64 duration_ns) {
  struct sonde_tls_request_key key = {
      .tgid = tgid,
      .direction = (__u8)direction,
      .protocol = (__u8)protocol,
      .method = (__u8)method,
      .status_class = status >= 100 && status <= 599 ? (__u8)(status / 100) : 0,
  };
  struct sonde_tls_request_stats* s = bpf_map_lookup_elem(&requests, &key);
  if (!s) {
    struct sonde_tls_request_stats zero = {};
    long err = bpf_map_update_elem(&requests, &key, &zero, BPF_NOEXIST);
    if (err != 0 && err != -17 /* EEXIST */) {
      count(SONDE_GOTLS_FULL_REQUESTS);
      return;
    }
    s = bpf_map_lookup_elem(&requests, &key);
    if (!s) return;
  }
  __u32 bucket = SONDE_GOTLS_BUCKETS;
  for (__u32 i = 0; i < SONDE_GOTLS_BUCKETS; i++) { /* constant bound: unrolled */
    if (duration_ns <= bucket_bounds_ns[i]) {
      bucket = i;
      break;
    }
  }
  __sync_fetch_and_add(&s->count, 1);
  __sync_fetch_and_add(&s->duration_sum_ns, duration_ns);
  if (bucket <= SONDE_GOTLS_BUCKETS) __sync_fetch_and_add(&s->buckets[bucket], 1);
}

/* ---- HTTP/2 framing ---- */

/* How a record is submitted: waking user space only past SONDE_GOTLS_H2_WAKEUP_BYTES (gotls.h);
 * timestamps are taken when the record is made, so a late drain changes no duration. */
static __always_inline __u64 h2_wakeup(void) {
  return bpf_ringbuf_query(&h2_events, BPF_RB_AVAIL_DATA) >= SONDE_GOTLS_H2_WAKEUP_BYTES
             ? BPF_RB_FORCE_WAKEUP
             : BPF_RB_NO_WAKEUP;
}

/* One Read's or Write's walk over its frames (the bpf_loop context). */
struct h2_walk {
  struct sonde_tls_process* proc; /* whose share of the ring buffer the events take */
  struct h2_state* st;
  const __u8* buf;
  __u64 len;
  __u64 pos;
  __u64 conn;
  __u64 now;
  __u32 pid;
  __u8 outgoing;
};

static __always_inline void h2_lose(struct h2_state* st, __u32 counter) {
  st->dead = 1;
  st->notify = 1;
  count(counter);
}

/* Counts `bytes` of h2_events against the process's share without a check: a record the kernel
 * owes user space (a connection lost, joined midway), bounded by the process's h2_states. */
static __always_inline void h2_events_owed(struct sonde_tls_process* proc, __s64 bytes) {
  __sync_fetch_and_add(&proc->held[SONDE_GOTLS_SHARED_H2_EVENTS], bytes);
}

/* Sends the event `kind` with the n (<= SONDE_GOTLS_H2_CHUNK) bytes at buf + pos as its data.
 * false (and the direction lost) when the process holds its share of the ring buffer, when the
 * ring buffer is full or when the bytes cannot be read. The sequence number advances either way:
 * user space sees the gap. */
static __always_inline bool h2_emit(struct h2_walk* w, __u8 kind, __u64 n) {
  struct h2_state* st = w->st;
  __u64 seq = st->seq++;
  const __u64 size = n > 0 ? sizeof(struct sonde_h2_event) : SONDE_H2_EVENT_HEAD;
  if (!share_take_n(w->proc, w->pid, SONDE_GOTLS_SHARED_H2_EVENTS, (__s64)size)) {
    /* Past its share, a process borrows while most of the buffer is free: one busy process
     * alone keeps the headroom; under contention it is cut off first. */
    if (bpf_ringbuf_query(&h2_events, BPF_RB_AVAIL_DATA) >=
        3 * (__u64)share[SONDE_GOTLS_SHARED_H2_EVENTS]) {
      share_refused(w->proc, SONDE_GOTLS_SHARED_H2_EVENTS);
      st->dead = 1;
      st->notify = 1;
      return false;
    }
    h2_events_owed(w->proc, (__s64)size);
  }
  struct sonde_h2_event* e;
  if (n > 0)
    e = bpf_ringbuf_reserve(&h2_events, sizeof(struct sonde_h2_event), 0);
  else
    e = bpf_ringbuf_reserve(&h2_events, SONDE_H2_EVENT_HEAD, 0);
  if (!e) {
    h2_events_owed(w->proc, -(__s64)size);
    h2_lose(st, SONDE_GOTLS_H2_RINGBUF_FULL);
    return false;
  }
  e->pid = w->pid;
  e->kind = kind;
  e->outgoing = w->outgoing;
  e->conn = w->conn;
  e->seq = seq;
  e->ts_ns = w->now;
  __builtin_memset(e->header, 0, sizeof(e->header) + sizeof(e->pad));
  if (kind == SONDE_H2_FRAME) __builtin_memcpy(e->header, st->hdr, sizeof(e->header));
  e->len = 0;
  if (n > 0) {
    /* The callers bound n already, but the verifier needs the bound on the register passed:
     * the empty asm statements stop clang from dropping it or passing an unbounded copy. */
    asm volatile("" : "+r"(n));
    if (n > SONDE_GOTLS_H2_CHUNK) n = SONDE_GOTLS_H2_CHUNK;
    asm volatile("" : "+r"(n));
    if (bpf_probe_read_user(e->data, n, w->buf + w->pos) != 0) {
      bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
      h2_events_owed(w->proc, -(__s64)size);
      h2_lose(st, SONDE_GOTLS_H2_RINGBUF_FULL);
      return false;
    }
    e->len = (__u16)n;
  }
  bpf_ringbuf_submit(e, h2_wakeup());
  return true;
}

/* Sends the LOST event a dead direction owes user space, if the ring buffer has room. */
static __always_inline void h2_notify(struct h2_walk* w) {
  struct h2_state* st = w->st;
  struct sonde_h2_event* e = bpf_ringbuf_reserve(&h2_events, SONDE_H2_EVENT_HEAD, 0);
  if (!e) return;
  h2_events_owed(w->proc, SONDE_H2_EVENT_HEAD);
  __builtin_memset(e, 0, SONDE_H2_EVENT_HEAD);
  e->pid = w->pid;
  e->kind = SONDE_H2_LOST;
  e->outgoing = w->outgoing;
  e->conn = w->conn;
  e->seq = st->seq++;
  e->ts_ns = w->now;
  bpf_ringbuf_submit(e, h2_wakeup());
  st->notify = 0;
}

/* One step of the walk: a frame header (or one byte of a header split across calls), a
 * skipped payload, or one chunk of a forwarded payload. Returns 1 to stop. */
static long h2_step(__u32 index, void* ctx) {
  struct h2_walk* w = ctx;
  struct h2_state* st = w->st;
  if (w->pos >= w->len || st->dead) return 1;
  __u64 left = w->len - w->pos;
  if (st->remaining > 0) {
    __u32 n = (__u64)st->remaining < left ? st->remaining : (__u32)left;
    if (st->forward) {
      if (n > SONDE_GOTLS_H2_CHUNK) n = SONDE_GOTLS_H2_CHUNK;
      if (!h2_emit(w, SONDE_H2_PAYLOAD, n)) return 1;
    }
    st->remaining -= n;
    w->pos += n;
    return 0;
  }
  const __u8* p = w->buf + w->pos;
  if (st->have == 0 && left >= 9) {
    if (bpf_probe_read_user(st->hdr, 9, p) != 0) {
      h2_lose(st, SONDE_GOTLS_H2_RINGBUF_FULL);
      return 1;
    }
    w->pos += 9;
  } else {
    if (bpf_probe_read_user(&st->hdr[st->have & 15], 1, p) != 0) {
      h2_lose(st, SONDE_GOTLS_H2_RINGBUF_FULL);
      return 1;
    }
    w->pos += 1;
    if (++st->have < 9) return 0;
  }
  st->have = 0;
  __u32 length = ((__u32)st->hdr[0] << 16) | ((__u32)st->hdr[1] << 8) | st->hdr[2];
  st->remaining = length;
  st->forward = sonde_h2_forwarded(st->hdr[3], length);
  if (st->forward && length > SONDE_GOTLS_H2_MAX_PAYLOAD) {
    h2_lose(st, SONDE_GOTLS_H2_BLOCK_BOUND);
    return 1;
  }
  __u32 n = 0;
  if (st->forward) {
    left = w->len - w->pos;
    n = (__u64)length < left ? length : (__u32)left;
    if (n > SONDE_GOTLS_H2_CHUNK) n = SONDE_GOTLS_H2_CHUNK;
  }
  if (!h2_emit(w, SONDE_H2_FRAME, n)) return 1;
  st->remaining -= n;
  w->pos += n;
  return 0;
}

/* Walks the frames of buf[pos..len) in one direction of a followed connection. bpf_loop (Linux
 * >= 5.17) keeps the verifier's work constant however many steps are allowed; an unrolled or
 * bounded loop of SONDE_GOTLS_H2_MAX_STEPS steps would be verified step by step. */
static __always_inline void h2_walk(struct h2_walk* w) {
  if (w->st->notify) h2_notify(w);
  if (w->st->dead) return;
  bpf_loop(SONDE_GOTLS_H2_MAX_STEPS, h2_step, w, 0);
  if (!w->st->dead && w->pos < w->len) h2_lose(w->st, SONDE_GOTLS_H2_WALK_BOUND);
  if (w->st->notify) h2_notify(w);
}

/* The 8 bytes of the preface after the 16 SONDE_GOTLS_PEEK bytes. */
static __always_inline bool h2_preface_tail(const char* buf, __u64 len) {
  char t[SONDE_GOTLS_H2_PREFACE_LEN - SONDE_GOTLS_PEEK];
  if (len < SONDE_GOTLS_H2_PREFACE_LEN) return false;
  if (bpf_probe_read_user(t, sizeof(t), buf + SONDE_GOTLS_PEEK) != 0) return false;
  return starts_with(t, "\r\nSM\r\n\r\n", sizeof(t));
}

/* A connection's preface went out (this process is the client) or came in (the server): both
 * directions are followed from here, and the frames after the preface in buf are walked. */
static __always_inline void h2_start(struct sonde_tls_process* proc, __u32 pid, __u64 conn,
                                     const void* buf, __u64 len, bool outgoing, __u64 now) {
  struct h2_state zero = {};
  struct h2_key k = {.pid = pid, .outgoing = !outgoing, .conn = conn};
  if (!insert_shared(&h2_states, &k, &zero, proc, pid, SONDE_GOTLS_SHARED_H2_STATES,
                     SONDE_GOTLS_FULL_H2_STATES))
    return;
  k.outgoing = outgoing;
  if (!insert_shared(&h2_states, &k, &zero, proc, pid, SONDE_GOTLS_SHARED_H2_STATES,
                     SONDE_GOTLS_FULL_H2_STATES)) {
    k.outgoing = !outgoing;
    delete_shared(&h2_states, &k, proc, SONDE_GOTLS_SHARED_H2_STATES);
    return;
  }
  struct h2_state* st = bpf_map_lookup_elem(&h2_states, &k);
  if (!st) return;
  struct h2_walk w = {.proc = proc,
                      .st = st,
                      .buf = buf,
                      .len = len,
                      .pos = SONDE_GOTLS_H2_PREFACE_LEN,
                      .conn = conn,
                      .now = now,
                      .pid = pid,
                      .outgoing = outgoing};
  if (!h2_emit(&w, SONDE_H2_PREFACE, 0)) {
    if (st->notify) h2_notify(&w);
    return;
  }
  h2_walk(&w);
}

/* Whether a call on a followed direction starts something else than the next frame: the
 * preface or an HTTP/1.x message at a frame boundary mean the *tls.Conn address now holds
 * another connection (the old one was freed and its memory reused). */
static __always_inline bool h2_restarts(const struct h2_state* st, const void* buf, __u64 len) {
  if (len < SONDE_GOTLS_PEEK) return false;
  if (!st->dead && (st->remaining != 0 || st->have != 0)) return false;
  char p[SONDE_GOTLS_PEEK];
  if (bpf_probe_read_user(p, sizeof(p), buf) != 0) return false;
  return http2_preface(p) || request_method(p) >= 0 || response_status(p) != 0;
}

/* Whether the 9 bytes at h can only be an HTTP/2 frame header (RFC 9113 6): a known type, only
 * the flags it defines, the reserved bit clear, stream 0 exactly for connection frames, and
 * the fixed lengths of the fixed-size frames. */
static __always_inline bool h2_plausible_header(const __u8* h, __u32* length) {
  __u32 len = ((__u32)h[0] << 16) | ((__u32)h[1] << 8) | h[2];
  __u8 type = h[3], flags = h[4];
  if (h[5] & 0x80) return false;
  bool stream0 = h[5] == 0 && h[6] == 0 && h[7] == 0 && h[8] == 0;
  bool ok;
  switch (type) {
    case 0: ok = !stream0 && (flags & ~0x09) == 0; break;                /* DATA */
    case 1: ok = !stream0 && (flags & ~0x2d) == 0; break;                /* HEADERS */
    case 2: ok = !stream0 && flags == 0 && len == 5; break;              /* PRIORITY */
    case 3: ok = !stream0 && flags == 0 && len == 4; break;              /* RST_STREAM */
    case 4: ok = stream0 && (flags & ~0x01) == 0 && len % 6 == 0; break; /* SETTINGS */
    case 6: ok = stream0 && (flags & ~0x01) == 0 && len == 8; break;     /* PING */
    case 7: ok = stream0 && flags == 0 && len >= 8; break;               /* GOAWAY */
    case 8: ok = flags == 0 && len == 4; break;                          /* WINDOW_UPDATE */
    case 9: ok = !stream0 && (flags & ~0x04) == 0; break;                /* CONTINUATION */
    default: ok = false; /* PUSH_PROMISE (Go never pushes) and extension types: too rare */
  }
  *length = len;
  return ok;
}

/* A Read on a connection the kernel does not follow, neither HTTP/1.x nor a preface: if it
 * starts with a plausible frame header whose frame ends within the call, followed by another
 * plausible header or by the end of the call (or if it is a plausible header read alone, 9
 * bytes, as Go's server reads them), the connection is HTTP/2 joined midway. The
 * agent is told once per connection; a marker state (midway) keeps it from being told again,
 * and lets HTTP/1.x parsing go on, so a body mistaken for frames costs one `unparsed` count. A
 * preface replaces the marker (a new connection at that address). */
static __always_inline void h2_midway(struct sonde_tls_process* proc, __u32 pid, __u64 conn,
                                      const char* p, const void* buf, __u64 len, bool outgoing) {
  __u32 first = 0;
  if (!h2_plausible_header((const __u8*)p, &first)) return;
  __u64 next = 9 + (__u64)first;
  if (len == 9) {
    /* A frame header read alone: the way Go's HTTP/2 server reads. */
  } else if (next > len) {
    return;
  } else if (next + 9 <= len) {
    __u8 h[9];
    __u32 second = 0;
    if (bpf_probe_read_user(h, sizeof(h), (const char*)buf + next) != 0) return;
    if (!h2_plausible_header(h, &second)) return;
  } else if (next != len) {
    return;
  }
  struct h2_state marker = {.dead = 1, .midway = 1};
  struct h2_key k = {.pid = pid, .outgoing = outgoing, .conn = conn};
  if (!share_take(proc, pid, SONDE_GOTLS_SHARED_H2_STATES)) {
    share_refused(proc, SONDE_GOTLS_SHARED_H2_STATES);
    return;
  }
  long err = bpf_map_update_elem(&h2_states, &k, &marker, BPF_NOEXIST);
  if (err != 0) {
    __sync_fetch_and_add(&proc->held[SONDE_GOTLS_SHARED_H2_STATES], -1);
    if (err != -17 /* EEXIST: marked already */) count(SONDE_GOTLS_FULL_H2_STATES);
    return;
  }
  struct sonde_h2_event* e = bpf_ringbuf_reserve(&h2_events, SONDE_H2_EVENT_HEAD, 0);
  if (!e) {
    count(SONDE_GOTLS_H2_RINGBUF_FULL);
    return;
  }
  h2_events_owed(proc, SONDE_H2_EVENT_HEAD);
  __builtin_memset(e, 0, SONDE_H2_EVENT_HEAD);
  e->pid = pid;
  e->kind = SONDE_H2_MIDWAY;
  e->outgoing = outgoing;
  e->conn = conn;
  e->ts_ns = bpf_ktime_get_ns();
  bpf_ringbuf_submit(e, h2_wakeup());
}

/* A Read of conn returned no bytes and an error: the connection is over (crypto/tls keeps a
 * Read error for good, except a deadline's; Go's HTTP/1.x server aborts its background one-byte
 * Read with a deadline after the response is written, when nothing is in flight, and Go's
 * HTTP/2 client and server close a connection on any Read error). Its state is freed now rather
 * than at its process's exit: a request still waiting for its response is counted as ended now,
 * status unknown (as at an exit, tls_probes.h), and user space is told that an HTTP/2
 * connection ended (SONDE_H2_CLOSED) so that its open streams end too. */
static __always_inline void conn_ended(struct sonde_tls_process* proc, __u32 pid, __u64 conn,
                                       const bool h2) {
  struct conn_key key = {.pid = pid, .conn = conn};
  delete_shared(&carried, &key, proc, SONDE_GOTLS_SHARED_CARRIED);
  __u64 now = bpf_ktime_get_ns();
  struct exchange* x = bpf_map_lookup_elem(&exchanges, &key);
  if (x) {
    struct exchange open = *x;
    if (bpf_map_delete_elem(&exchanges, &key) == 0) {
      __sync_fetch_and_add(&proc->held[SONDE_GOTLS_SHARED_EXCHANGES], -1);
      if (open.direction == SONDE_TLS_CLIENT || open.direction == SONDE_TLS_SERVER)
        count_request(pid, open.direction, SONDE_TLS_HTTP1, open.method, 0, now - open.start_ns);
    }
  }
  if (!h2) return;
  struct h2_key hk = {.pid = pid, .outgoing = 0, .conn = conn};
  struct h2_state* st = bpf_map_lookup_elem(&h2_states, &hk);
  if (st && !st->midway) {
    struct h2_walk w = {
        .proc = proc, .st = st, .conn = conn, .now = now, .pid = pid, .outgoing = 0};
    if (st->notify) h2_notify(&w);
    if (!st->dead) h2_emit(&w, SONDE_H2_CLOSED, 0);
  }
  delete_shared(&h2_states, &hk, proc, SONDE_GOTLS_SHARED_H2_STATES);
  hk.outgoing = 1;
  delete_shared(&h2_states, &hk, proc, SONDE_GOTLS_SHARED_H2_STATES);
}

/* Plaintext leaving (Write) or arriving (Read returned) on conn: start or finish an exchange.
 * `outgoing` tells which side of the call the bytes are on. `h2` (a constant per program) says
 * whether HTTP/2 framing is followed: the *_h1 programs leave it out for kernels without
 * bpf_loop (before Linux 5.17), where the HTTP/2 programs cannot load. */
static __always_inline void on_plaintext(struct sonde_tls_process* proc, __u32 pid, __u64 conn,
                                         const void* buf, __u64 len, bool outgoing, const bool h2) {
  struct h2_key hk = {.pid = pid, .outgoing = outgoing, .conn = conn};
  struct h2_state* st = h2 ? bpf_map_lookup_elem(&h2_states, &hk) : NULL;
  bool marked = false;
  if (st && st->midway) {
    /* Reported already; the bytes go on to the HTTP/1.x parser, in case the guess was wrong
     * (a body that looked like frames): it must keep working, a one-byte Read included. */
    marked = true;
  } else if (st) {
    if (!h2_restarts(st, buf, len)) {
      struct h2_walk w = {.proc = proc,
                          .st = st,
                          .buf = buf,
                          .len = len,
                          .pos = 0,
                          .conn = conn,
                          .now = bpf_ktime_get_ns(),
                          .pid = pid,
                          .outgoing = outgoing};
      h2_walk(&w);
      return;
    }
    delete_shared(&h2_states, &hk, proc, SONDE_GOTLS_SHARED_H2_STATES);
    hk.outgoing = !outgoing;
    delete_shared(&h2_states, &hk, proc, SONDE_GOTLS_SHARED_H2_STATES);
  }
  char p[SONDE_GOTLS_PEEK] = {};
  struct conn_key key = {.pid = pid, .conn = conn};
  struct sonde_gotls_carried* first = outgoing ? NULL : bpf_map_lookup_elem(&carried, &key);
  if (!outgoing && len == 1) {
    struct sonde_gotls_carried c = {.ts_ns = bpf_ktime_get_ns()};
    if (bpf_probe_read_user(&c.byte, 1, buf) == 0)
      insert_shared(&carried, &key, &c, proc, pid, SONDE_GOTLS_SHARED_CARRIED,
                    SONDE_GOTLS_FULL_CARRIED);
    return;
  }
  if (first) {
    p[0] = first->byte;
    delete_shared(&carried, &key, proc, SONDE_GOTLS_SHARED_CARRIED);
    if (len < SONDE_GOTLS_PEEK - 1) return;
    if (bpf_probe_read_user(p + 1, sizeof(p) - 1, buf) != 0) return;
  } else {
    if (len < SONDE_GOTLS_PEEK) {
      /* Too short to be the start of a request or response. Go's HTTP/2 server reads each frame
       * header alone (9 bytes), then its payload. */
      if (h2 && len == 9 && !outgoing && !marked && bpf_probe_read_user(p, 9, buf) == 0)
        h2_midway(proc, pid, conn, p, buf, len, outgoing);
      return;
    }
    if (bpf_probe_read_user(p, sizeof(p), buf) != 0) return;
  }

  __u64 now = bpf_ktime_get_ns();
  __u16 direction = outgoing ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER;
  if (http2_preface(p)) {
    count_request(pid, direction, SONDE_TLS_HTTP2, SONDE_HTTP_OTHER, 0, 0);
    if (h2 && !first && h2_preface_tail(buf, len))
      h2_start(proc, pid, conn, buf, len, outgoing, now);
    return;
  }
  int method = request_method(p);
  if (method < 0 && other_request(p)) {
    /* Unlisted methods are matched loosely; a body that happens to look like a request line
     * must not replace the exchange in progress. */
    if (bpf_map_lookup_elem(&exchanges, &key)) return;
    method = SONDE_HTTP_OTHER;
  }
  if (method >= 0) {
    /* A request: sent by a client (outgoing) or received by a server. */
    struct exchange x = {.start_ns = now, .direction = direction, .method = (__u16)method};
    insert_shared(&exchanges, &key, &x, proc, pid, SONDE_GOTLS_SHARED_EXCHANGES,
                  SONDE_GOTLS_FULL_EXCHANGES);
    return;
  }
  __u16 status = response_status(p);
  if (!status) { /* the body or a later part of a message, or HTTP/2 joined midway */
    /* Reads only: Go's server writes its SETTINGS before it reads the client's preface, so a
     * Write without a followed state can be the start of a connection about to be followed. */
    if (h2 && !outgoing && !first && !marked) h2_midway(proc, pid, conn, p, buf, len, outgoing);
    return;
  }
  /* 1xx responses other than 101 (100 Continue, 103 Early Hints) are interim: the final
   * response follows on the same exchange. */
  if (status >= 100 && status < 200 && status != 101) return;
  struct exchange* x = bpf_map_lookup_elem(&exchanges, &key);
  if (!x) return;
  /* A response goes the other way from its request. */
  bool matches = outgoing ? x->direction == SONDE_TLS_SERVER : x->direction == SONDE_TLS_CLIENT;
  if (matches)
    count_request(pid, x->direction, SONDE_TLS_HTTP1, x->method, status, now - x->start_ns);
  delete_shared(&exchanges, &key, proc, SONDE_GOTLS_SHARED_EXCHANGES);
}

static __always_inline void write_called(struct pt_regs* ctx, const bool h2, const __u32 site) {
  __u32 pid = current_tgid_for_agent();
  struct sonde_tls_process* bytes = process(pid);
  if (!bytes) return;
  __sync_fetch_and_add(&bytes->hits[site], 1);
  __u64 len = GO_ARG3(ctx);
  __sync_fetch_and_add(&bytes->written, len);
  on_plaintext(bytes, pid, GO_ARG1(ctx), (const void*)GO_ARG2(ctx), len, true, h2);
}

static __always_inline void read_called(struct pt_regs* ctx, const __u32 site) {
  __u32 pid = current_tgid_for_agent();
  struct sonde_tls_process* proc = process(pid);
  if (!proc) return;
  __sync_fetch_and_add(&proc->hits[site], 1);
  struct goroutine_key key = {.pid = pid, .g = GO_G(ctx)};
  struct pending_read r = {.conn = GO_ARG1(ctx), .buf = GO_ARG2(ctx)};
  insert_shared(&reads, &key, &r, proc, pid, SONDE_GOTLS_SHARED_READS, SONDE_GOTLS_FULL_READS);
}

/* At a RET of (*Conn).Read: the results are in the argument registers. */
static __always_inline void read_returned(struct pt_regs* ctx, const bool h2, const __u32 site) {
  __u32 pid = current_tgid_for_agent();
  struct sonde_tls_process* bytes = bpf_map_lookup_elem(&processes, &pid);
  if (!bytes) return;
  __sync_fetch_and_add(&bytes->hits[site], 1);
  struct goroutine_key key = {.pid = pid, .g = GO_G(ctx)};
  struct pending_read* r = bpf_map_lookup_elem(&reads, &key);
  if (!r) return;
  struct pending_read read = *r;
  delete_shared(&reads, &key, bytes, SONDE_GOTLS_SHARED_READS);
  long n = (long)GO_ARG1(ctx);
  if (n == 0 && GO_RET_ERR_TYPE(ctx) != 0) conn_ended(bytes, pid, read.conn, h2);
  if (n <= 0) return;
  __sync_fetch_and_add(&bytes->read, (__u64)n);
  on_plaintext(bytes, pid, read.conn, (const void*)read.buf, (__u64)n, false, h2);
}

/* Each program that sees plaintext comes twice: with HTTP/2 framing, and as *_h1 without it
 * (HTTP/1.x and the preface count only) for kernels without bpf_loop; TlsProbes loads one set. */
SEC("uprobe")
int tls_write_enter(struct pt_regs* ctx) {
  write_called(ctx, true, SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP);
  return 0;
}

SEC("uprobe")
int tls_write_enter_h1(struct pt_regs* ctx) {
  write_called(ctx, false, SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP);
  return 0;
}

SEC("uprobe")
int tls_write_checked(struct pt_regs* ctx) {
  if (!GO_STACK_CHECK_FAILS(ctx)) write_called(ctx, true, SONDE_GOTLS_SITE_ENTRY_EMULATED);
  return 0;
}

SEC("uprobe")
int tls_write_checked_h1(struct pt_regs* ctx) {
  if (!GO_STACK_CHECK_FAILS(ctx)) write_called(ctx, false, SONDE_GOTLS_SITE_ENTRY_EMULATED);
  return 0;
}

SEC("uprobe")
int tls_read_enter(struct pt_regs* ctx) {
  read_called(ctx, SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP);
  return 0;
}

SEC("uprobe")
int tls_read_checked(struct pt_regs* ctx) {
  if (!GO_STACK_CHECK_FAILS(ctx)) read_called(ctx, SONDE_GOTLS_SITE_ENTRY_EMULATED);
  return 0;
}

SEC("uprobe")
int tls_read_return(struct pt_regs* ctx) {
  read_returned(ctx, true, SONDE_GOTLS_SITE_RETURN_SINGLE_STEP);
  return 0;
}

SEC("uprobe")
int tls_read_return_h1(struct pt_regs* ctx) {
  read_returned(ctx, false, SONDE_GOTLS_SITE_RETURN_SINGLE_STEP);
  return 0;
}

#if defined(__TARGET_ARCH_x86)
/* At a one-byte near `ret` (C3), which this program performs. The attach cookie is the `ret`'s
 * address at run time: the agent uses this program only in position-dependent (ET_EXEC)
 * binaries, where the address in the file is the address in every process.
 *
 * The registers are written only while the instruction pointer is still that `ret`. Every
 * program attached to a site sees the registers the programs before it left: when another one
 * has already performed the `ret` (a second agent during a DaemonSet rollout with maxSurge,
 * another tool using the same trick), the instruction pointer is the return address, and
 * performing the `ret` again would pop a second return address and crash the Go program. The
 * Read's results (RAX, and the goroutine in R14) are untouched by a `ret`, so it is counted
 * either way. If the return address cannot be read, the registers stay as they are and the
 * kernel single-steps the `ret` as usual. */
static __always_inline void read_return_ret(struct pt_regs* ctx, const bool h2) {
  read_returned(ctx, h2, SONDE_GOTLS_SITE_RETURN_BPF_RET);
  if (ctx->ip != bpf_get_attach_cookie(ctx)) return;
  __u64 return_address;
  __u64 sp = ctx->sp;
  if (bpf_probe_read_user(&return_address, sizeof return_address, (const void*)sp) == 0) {
    ctx->ip = return_address;
    ctx->sp = sp + 8;
  }
}

SEC("uprobe")
int tls_read_return_ret(struct pt_regs* ctx) {
  read_return_ret(ctx, true);
  return 0;
}

SEC("uprobe")
int tls_read_return_ret_h1(struct pt_regs* ctx) {
  read_return_ret(ctx, false);
  return 0;
}
#endif
