// SPDX-License-Identifier: GPL-2.0
/* Go crypto/tls: requests, bytes and latency from uprobes on (*Conn).Write and (*Conn).Read.
 *
 * Go moves goroutine stacks, so return probes (uretprobes) would corrupt them: Read's returns
 * are probed by uprobes on each RET instruction found by decoding the function. Arguments
 * follow Go's register ABI (amd64 Go >= 1.17: RAX, RBX, RCX, goroutine in R14; arm64 Go >=
 * 1.18: X0-X2, goroutine in X28). A Read is matched to its return by goroutine, not thread.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "dropped.bpf.h"
#include "gotls.h"

char LICENSE[] SEC("license") = "GPL";

#if defined(__TARGET_ARCH_x86)
#define GO_ARG1(ctx) ((ctx)->ax)
#define GO_ARG2(ctx) ((ctx)->bx)
#define GO_ARG3(ctx) ((ctx)->cx)
#define GO_G(ctx) ((ctx)->r14)
#elif defined(__TARGET_ARCH_arm64)
#define GO_ARG1(ctx) (((struct user_pt_regs*)(ctx))->regs[0])
#define GO_ARG2(ctx) (((struct user_pt_regs*)(ctx))->regs[1])
#define GO_ARG3(ctx) (((struct user_pt_regs*)(ctx))->regs[2])
#define GO_G(ctx) (((struct user_pt_regs*)(ctx))->regs[28])
#else
#error "gotls: unsupported architecture"
#endif

/* Processes whose TLS calls count (user space adds Go TLS users of the selected containers). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_PROCESSES);
  __type(key, __u32);
  __type(value, struct sonde_tls_bytes);
} processes SEC(".maps");

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
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct goroutine_key);
  __type(value, struct pending_read);
} reads SEC(".maps");

struct conn_key {
  __u32 pid;
  __u32 pad;
  __u64 conn;
};

/* The request waiting for its response on a connection. */
struct exchange {
  __u64 start_ns;
  __u16 direction;
  __u16 method;
  __u32 pad;
};

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct conn_key);
  __type(value, struct exchange);
} exchanges SEC(".maps");

/* A one-byte Read on a connection, held to be put in front of the next Read's bytes: Go's HTTP
 * server reads one byte in the background while a handler runs (to notice a closed
 * connection), so the next request can arrive as "G" + "ET /...". */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, SONDE_GOTLS_MAX_INFLIGHT);
  __type(key, struct conn_key);
  __type(value, char);
} carried SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} events SEC(".maps");

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

static __always_inline void emit(__u32 pid, __u16 direction, __u16 protocol, __u16 method,
                                 __u16 status, __u64 duration_ns) {
  struct sonde_tls_event* e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count_drop();
    return;
  }
  e->duration_ns = duration_ns;
  e->pid = pid;
  e->direction = direction;
  e->protocol = protocol;
  e->method = method;
  e->status = status;
  e->pad = 0;
  bpf_ringbuf_submit(e, 0);
}

/* Plaintext leaving (Write) or arriving (Read returned) on conn: start or finish an exchange.
 * `outgoing` tells which side of the call the bytes are on. */
static __always_inline void on_plaintext(__u32 pid, __u64 conn, const void* buf, __u64 len,
                                         bool outgoing) {
  char p[SONDE_GOTLS_PEEK] = {};
  struct conn_key key = {.pid = pid, .conn = conn};
  char* first = outgoing ? NULL : bpf_map_lookup_elem(&carried, &key);
  if (!outgoing && len == 1) {
    char c = 0;
    if (bpf_probe_read_user(&c, 1, buf) == 0) bpf_map_update_elem(&carried, &key, &c, BPF_ANY);
    return;
  }
  if (first) {
    p[0] = *first;
    bpf_map_delete_elem(&carried, &key);
    if (len < SONDE_GOTLS_PEEK - 1) return;
    if (bpf_probe_read_user(p + 1, sizeof(p) - 1, buf) != 0) return;
  } else {
    if (len < SONDE_GOTLS_PEEK) return; /* too short to be the start of a request or response */
    if (bpf_probe_read_user(p, sizeof(p), buf) != 0) return;
  }

  __u64 now = bpf_ktime_get_ns();
  if (http2_preface(p)) {
    emit(pid, outgoing ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER, SONDE_TLS_HTTP2, SONDE_HTTP_OTHER, 0,
         0);
    return;
  }
  int method = request_method(p);
  if (method >= 0) {
    /* A request: sent by a client (outgoing) or received by a server. */
    struct exchange x = {.start_ns = now,
                         .direction = outgoing ? SONDE_TLS_CLIENT : SONDE_TLS_SERVER,
                         .method = (__u16)method};
    bpf_map_update_elem(&exchanges, &key, &x, BPF_ANY);
    return;
  }
  __u16 status = response_status(p);
  if (!status) return; /* the body or a later part of a message */
  struct exchange* x = bpf_map_lookup_elem(&exchanges, &key);
  if (!x) return;
  /* A response goes the other way from its request. */
  bool matches = outgoing ? x->direction == SONDE_TLS_SERVER : x->direction == SONDE_TLS_CLIENT;
  if (matches) emit(pid, x->direction, SONDE_TLS_HTTP1, x->method, status, now - x->start_ns);
  bpf_map_delete_elem(&exchanges, &key);
}

SEC("uprobe")
int tls_write_enter(struct pt_regs* ctx) {
  __u32 pid = bpf_get_current_pid_tgid() >> 32;
  struct sonde_tls_bytes* bytes = bpf_map_lookup_elem(&processes, &pid);
  if (!bytes) return 0;
  __u64 len = GO_ARG3(ctx);
  __sync_fetch_and_add(&bytes->written, len);
  on_plaintext(pid, GO_ARG1(ctx), (const void*)GO_ARG2(ctx), len, true);
  return 0;
}

SEC("uprobe")
int tls_read_enter(struct pt_regs* ctx) {
  __u32 pid = bpf_get_current_pid_tgid() >> 32;
  if (!bpf_map_lookup_elem(&processes, &pid)) return 0;
  struct goroutine_key key = {.pid = pid, .g = GO_G(ctx)};
  struct pending_read r = {.conn = GO_ARG1(ctx), .buf = GO_ARG2(ctx)};
  bpf_map_update_elem(&reads, &key, &r, BPF_ANY);
  return 0;
}

/* Attached at each RET of (*Conn).Read: the results are in the argument registers. */
SEC("uprobe")
int tls_read_return(struct pt_regs* ctx) {
  __u32 pid = bpf_get_current_pid_tgid() >> 32;
  struct sonde_tls_bytes* bytes = bpf_map_lookup_elem(&processes, &pid);
  if (!bytes) return 0;
  struct goroutine_key key = {.pid = pid, .g = GO_G(ctx)};
  struct pending_read* r = bpf_map_lookup_elem(&reads, &key);
  if (!r) return 0;
  struct pending_read read = *r;
  bpf_map_delete_elem(&reads, &key);
  long n = (long)GO_ARG1(ctx);
  if (n <= 0) return 0;
  __sync_fetch_and_add(&bytes->read, (__u64)n);
  on_plaintext(pid, read.conn, (const void*)read.buf, (__u64)n, false);
  return 0;
}
