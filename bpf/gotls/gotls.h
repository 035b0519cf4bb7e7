/* Go crypto/tls instrumentation, shared by bpf/gotls/gotls.bpf.c and the agent (C only).
 *
 * HTTP/1.x: only protocol metadata leaves the kernel: direction, HTTP method, status class,
 * protocol and timings, summed per process (tgid) in maps. The plaintext is peeked at
 * (SONDE_GOTLS_PEEK bytes) inside the BPF program and never copied to a map or to user space.
 *
 * HTTP/2: the kernel follows the framing of each connection whose preface it saw, per direction
 * (struct h2_state in gotls.bpf.c), and sends user space, through the ring buffer `h2_events`,
 * every frame's 9-byte header and the payload of HEADERS, CONTINUATION, RST_STREAM and PUSH_PROMISE
 * frames (GOAWAY's when at most SONDE_GOTLS_H2_CHUNK bytes): what HPACK decoding and naming a
 * stream need. DATA payloads (request and response bodies) are skipped in the kernel and never
 * copied; neither are PING, SETTINGS or WINDOW_UPDATE payloads.
 *
 * Every map is a plain hash (no LRU): an entry leaves only when user space deletes it (the
 * process exited) or the kernel finishes with it (an exchange answered, a Read returned, the
 * connection ended: a Read of it failed), so no live state is evicted. An insert into a full map
 * fails and is counted per map in `counters`.
 *
 * The tables a process fills at its peers' pace (h2_states, exchanges, reads, carried: one
 * entry per connection or blocked Read) are shared: each process (tgid) may hold at most its
 * share of each (enum sonde_gotls_shared_table), so no tenant can fill them for the others. An
 * insert past the share fails for that process only, counted against it (over_share in struct
 * sonde_tls_process) and node-wide (SONDE_GOTLS_SHARE_*). The ring buffer of HTTP/2 events is
 * shared alike (SONDE_GOTLS_SHARED_H2_EVENTS): a process may have at most its share of its bytes
 * not yet read by user space, so a process that floods it with frames loses its own connections
 * and nobody else's. User space gives the bytes back as it reads them (struct
 * sonde_gotls_released).
 */
#ifndef SONDE_BPF_GOTLS_H
#define SONDE_BPF_GOTLS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bytes of plaintext the kernel looks at to recognize HTTP/1.x and HTTP/2. */
#define SONDE_GOTLS_PEEK 16

enum sonde_tls_direction {
  SONDE_TLS_CLIENT = 1, /* this process sent the request */
  SONDE_TLS_SERVER = 2, /* this process answered it */
};

enum sonde_http_method {
  SONDE_HTTP_OTHER = 0, /* a request line with a method outside this list */
  SONDE_HTTP_GET,
  SONDE_HTTP_POST,
  SONDE_HTTP_PUT,
  SONDE_HTTP_DELETE,
  SONDE_HTTP_HEAD,
  SONDE_HTTP_PATCH,
  SONDE_HTTP_OPTIONS,
  SONDE_HTTP_METHOD_COUNT,
};

enum sonde_tls_protocol {
  SONDE_TLS_HTTP1 = 1, /* one count per request/response exchange */
  SONDE_TLS_HTTP2 = 2, /* one count per connection (its preface), in the kernel */
  /* Streams, counted in user space from the h2_events ring buffer (never by the kernel). */
  SONDE_TLS_HTTP2_STREAM = 3,
  SONDE_TLS_GRPC_CALL = 4,
};

/* Upper bounds of the request duration histogram, in nanoseconds (the agent exports them in
 * seconds); a last, unbounded bucket follows. */
#define SONDE_GOTLS_BUCKET_BOUNDS_NS                                                         \
  {                                                                                          \
    1000000ULL, 2500000ULL, 5000000ULL, 10000000ULL, 25000000ULL, 50000000ULL, 100000000ULL, \
        250000000ULL, 500000000ULL, 1000000000ULL, 2500000000ULL, 5000000000ULL              \
  }
#define SONDE_GOTLS_BUCKETS 12

/* Finished exchanges of one process, by kind. */
struct sonde_tls_request_key {
  __u32 tgid;
  __u8 direction;    /* enum sonde_tls_direction */
  __u8 protocol;     /* enum sonde_tls_protocol */
  __u8 method;       /* enum sonde_http_method; OTHER for a preface */
  __u8 status_class; /* status / 100 (1..5), 0 when unknown; 0 for a preface; 6: reset */
  __u8 grpc_code;    /* gRPC calls: grpc-status + 1 (1..17), 0 when none; 0 otherwise */
  __u8 pad[3];
};

/* status_class of an HTTP/2 stream ended by RST_STREAM or GOAWAY instead of END_STREAM. */
#define SONDE_TLS_STATUS_RESET 6

struct sonde_tls_request_stats {
  __u64 count;
  __u64 duration_sum_ns;                  /* request seen → final response seen */
  __u64 buckets[SONDE_GOTLS_BUCKETS + 1]; /* non-cumulative; the last is > every bound */
};

/* Kinds of probe site, by what a hit costs the probed call (the kernel emulates a jump, and
 * single-steps most other instructions out of line: about ten times slower; the agent measures
 * both at start, agent/kernel/uprobe_cost.h). Which program runs says which kind its site is. */
enum sonde_gotls_site {
  SONDE_GOTLS_SITE_ENTRY_EMULATED = 0, /* *_checked: the `jbe` of Go's stack check */
  SONDE_GOTLS_SITE_ENTRY_SINGLE_STEP,  /* *_enter: the function's first instruction */
  SONDE_GOTLS_SITE_RETURN_SINGLE_STEP, /* tls_read_return*: a RET the kernel single-steps */
  SONDE_GOTLS_SITE_RETURN_BPF_RET,     /* tls_read_return_ret*: a RET the program performs */
  SONDE_GOTLS_SITE_COUNT,
};

/* Per counted process (tgid), summed in the kernel: TLS plaintext bytes and probe hits by kind of
 * site. A hit is counted once per call of the probed function: an entry hit whose stack check
 * fails (the call grows its goroutine stack, then restarts and hits again) is not counted, so
 * entry hits equal Read and Write calls and return hits equal Read returns. Hits of processes
 * the kernel does not count (filtered out by cgroup, or past a full `processes` map) are not
 * counted either. */
/* The node-wide tables a process holds a share of. */
enum sonde_gotls_shared_table {
  SONDE_GOTLS_SHARED_H2_STATES = 0,
  SONDE_GOTLS_SHARED_EXCHANGES,
  SONDE_GOTLS_SHARED_READS,
  SONDE_GOTLS_SHARED_CARRIED,
  SONDE_GOTLS_SHARED_H2_EVENTS, /* bytes of h2_events records not read by user space yet */
  SONDE_GOTLS_SHARED_COUNT,
};

/* A process's share of each shared table: 1/SONDE_GOTLS_SHARE_DIVISOR of its entries
 * (SONDE_GOTLS_H2_EVENTS_SHARE bytes of the ring buffer for SONDE_GOTLS_SHARED_H2_EVENTS; the
 * default of the `share` configuration, which tests lower). */
#define SONDE_GOTLS_SHARE_DIVISOR 8

struct sonde_tls_process {
  __u64 read;
  __u64 written;
  __u64 hits[SONDE_GOTLS_SITE_COUNT];
  /* Entries of each shared table the kernel inserted for this process minus those it deleted,
   * and those user space deleted (struct sonde_gotls_released) still to subtract. Signed: an
   * entry inserted before this record was re-created (the agent took the process while it
   * lived) and deleted after counts -1, which only leaves the process more room. */
  __s64 held[SONDE_GOTLS_SHARED_COUNT];
  /* Inserts refused because the process held its share: its own state lost (a connection not
   * followed, a request or Read result not matched). */
  __u64 over_share[SONDE_GOTLS_SHARED_COUNT];
};

/* Entries of a live process's shared tables that user space deleted (an HTTP/2 connection the
 * tracker evicted, idle state swept), per tgid in the map `released`: written by user space
 * only, so the kernel's atomic counts in struct sonde_tls_process are never overwritten. */
struct sonde_gotls_released {
  __u64 n[SONDE_GOTLS_SHARED_COUNT];
};

/* A one-byte Read's byte, held for the connection's next Read (the map `carried`), and when it
 * was read (bpf_ktime_get_ns()): an entry older than TlsProbes::kIdleStateAgeNs is freed by the
 * agent. */
struct sonde_gotls_carried {
  __u64 ts_ns;
  char byte;
  __u8 pad[7];
};

/* Failed inserts, per map (index of the per-CPU array `counters`). */
enum sonde_gotls_counter {
  SONDE_GOTLS_FULL_PROCESSES = 0, /* a process's bytes and requests not counted */
  SONDE_GOTLS_FULL_REQUESTS,      /* a finished exchange not counted */
  SONDE_GOTLS_FULL_READS,         /* a Read's result not seen */
  SONDE_GOTLS_FULL_EXCHANGES,     /* a request whose response will not be matched */
  SONDE_GOTLS_FULL_CARRIED,       /* a one-byte Read not joined to the next */
  SONDE_GOTLS_FULL_H2_STATES,     /* an HTTP/2 connection not followed (h2_states full) */
  SONDE_GOTLS_H2_RINGBUF_FULL,    /* an HTTP/2 event not sent: its connection is lost */
  SONDE_GOTLS_H2_WALK_BOUND,      /* SONDE_GOTLS_H2_MAX_STEPS reached in one call: lost */
  SONDE_GOTLS_H2_BLOCK_BOUND,     /* a header frame over SONDE_GOTLS_H2_MAX_PAYLOAD: lost */
  /* An insert refused because its process held its share of the table, in the order of enum
   * sonde_gotls_shared_table (SONDE_GOTLS_SHARE_FIRST + table). */
  SONDE_GOTLS_SHARE_H2_STATES,
  SONDE_GOTLS_SHARE_EXCHANGES,
  SONDE_GOTLS_SHARE_READS,
  SONDE_GOTLS_SHARE_CARRIED,
  SONDE_GOTLS_SHARE_H2_EVENTS,
  SONDE_GOTLS_COUNTER_COUNT,
};

#define SONDE_GOTLS_SHARE_FIRST SONDE_GOTLS_SHARE_H2_STATES

#define SONDE_GOTLS_MAX_PROCESSES 16384
#define SONDE_GOTLS_MAX_REQUEST_KEYS 65536
#define SONDE_GOTLS_MAX_INFLIGHT 65536
#define SONDE_GOTLS_MAX_CGROUPS 4096

/* HTTP/2 framing, bounds. */
/* Per (process, connection, direction) framing states: two per followed connection. An entry
 * lives until the connection ends (a Read of it fails, SONDE_H2_CLOSED), its process exits (the
 * agent deletes it, TlsProbes::take()) or the agent evicts the connection (the least recently
 * active past its bounds, see http2_tracker.h); a new
 * connection finding the map full, or its process holding its share of it, is not followed
 * (SONDE_GOTLS_FULL_H2_STATES, SONDE_GOTLS_SHARE_H2_STATES). A connection joined midway holds
 * one marker entry (SONDE_H2_MIDWAY) until its process exits. */
#define SONDE_GOTLS_MAX_H2_STATES 16384
/* Payload bytes per event: a larger forwarded payload is sent in several events, in order. */
#define SONDE_GOTLS_H2_CHUNK 256
/* The largest forwarded frame payload (HEADERS, CONTINUATION, PUSH_PROMISE; a header block is
 * bounded in user space across frames as well): past it the connection is lost. */
#define SONDE_GOTLS_H2_MAX_PAYLOAD 16384
/* Steps of the frame walk in one Read or Write (bpf_loop): a frame header, a skipped payload
 * or one chunk each. A TLS record (at most 16 KiB, what one Read returns) of the smallest frames
 * (9 bytes each) takes 1821; a Write can be larger. Past it the connection is lost. */
#define SONDE_GOTLS_H2_MAX_STEPS 8192
/* The ring buffer (a power of two, in bytes): ~27,000 payload events or ~180,000 others. 8 MiB
 * so that one busy process alone may be 6 MiB ahead of the agent (SONDE_GOTLS_H2_EVENTS_SHARE)
 * with 2 MiB kept for the others. */
#define SONDE_GOTLS_H2_RINGBUF_BYTES (8 << 20)
/* Records wake user space only once this many bytes wait in the ring buffer: below it user space
 * drains on a timer (a wakeup per record would cost more than the record), past it at once, so a
 * flood is drained as it comes instead of filling the buffer between two drains. A quarter of a
 * process's share of the buffer (SONDE_GOTLS_H2_EVENTS_SHARE), so a busy process is drained long
 * before its share is reached, unless user space falls behind. */
#define SONDE_GOTLS_H2_WAKEUP_BYTES (SONDE_GOTLS_H2_RINGBUF_BYTES / 16)
/* A process's share of the ring buffer's unread bytes (SONDE_GOTLS_SHARED_H2_EVENTS): a quarter.
 * Past it, a process still gets room while less than three times its share (three quarters of
 * the buffer) waits in it (a busy process alone keeps most of the headroom), and loses its
 * connection once more does: one process flooding the buffer leaves at least a quarter of it to
 * the others. */
#define SONDE_GOTLS_H2_EVENTS_SHARE (SONDE_GOTLS_H2_RINGBUF_BYTES / 4)

/* HTTP/2 connection preface (RFC 9113 3.4): 24 bytes. */
#define SONDE_GOTLS_H2_PREFACE_LEN 24

enum sonde_h2_event_kind {
  /* The preface: a connection starts. outgoing: this process is the client (it wrote it). */
  SONDE_H2_PREFACE = 1,
  /* A frame header (header[]), with the first bytes of its payload in data[] if forwarded. */
  SONDE_H2_FRAME = 2,
  /* The next bytes of the current forwarded frame's payload. */
  SONDE_H2_PAYLOAD = 3,
  /* Events of this direction were lost (ring buffer full, a bound hit): stop counting it. */
  SONDE_H2_LOST = 4,
  /* A connection without a followed start (it predates the probes) whose call starts with
   * what can only be HTTP/2 frames (seen on a Read): not followed (no HPACK history), sent
   * once. */
  SONDE_H2_MIDWAY = 5,
  /* The connection ended (a Read of it failed, see gotls.bpf.c): the kernel freed its framing
   * states; its streams still open end now. Sent in the read direction's sequence. */
  SONDE_H2_CLOSED = 6,
};

/* One ring-buffer record. Records without payload end at `data` (SONDE_H2_EVENT_HEAD bytes). */
struct sonde_h2_event {
  __u32 pid;
  __u8 kind;     /* enum sonde_h2_event_kind */
  __u8 outgoing; /* 1: written by this process, 0: read by it */
  __u16 len;     /* bytes of data[] used */
  __u64 conn;    /* the *tls.Conn */
  __u64 seq;     /* per (pid, conn, direction): 0, 1, 2, ...; a gap means events were lost */
  __u64 ts_ns;   /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
  __u8 header[9];
  __u8 pad[7];
  __u8 data[SONDE_GOTLS_H2_CHUNK];
};
#define SONDE_H2_EVENT_HEAD __builtin_offsetof(struct sonde_h2_event, data) /* 48 */

/* Whether a frame's payload goes to user space (RFC 9113 6): HEADERS (1), RST_STREAM (3),
 * PUSH_PROMISE (5), CONTINUATION (9), and GOAWAY (7) when its debug data is short; the kernel
 * and the agent decide it alike. */
static inline int sonde_h2_forwarded(__u8 type, __u32 length) {
  if (type == 1 || type == 3 || type == 5 || type == 9) return 1;
  return type == 7 && length <= SONDE_GOTLS_H2_CHUNK;
}

#endif
