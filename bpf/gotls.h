/* Go crypto/tls instrumentation, shared by bpf/gotls.bpf.c and the agent (C only).
 *
 * Only protocol metadata leaves the kernel: direction, HTTP method, status class, protocol and
 * timings, summed per process (tgid) in maps. The plaintext is peeked at (SONDE_GOTLS_PEEK
 * bytes) inside the BPF program and never copied to a map or to user space.
 *
 * Every map is a plain hash (no LRU): an entry leaves only when user space deletes it (the
 * process exited) or the kernel finishes with it (an exchange answered, a Read returned), so no
 * live state is evicted. An insert into a full map fails and is counted per map in `counters`.
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
  SONDE_TLS_HTTP2 = 2, /* one count per connection (its preface); streams are not parsed */
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
  __u8 method;       /* enum sonde_http_method; OTHER for HTTP/2 */
  __u8 status_class; /* status / 100 (1..5), 0 when unknown; 0 for HTTP/2 */
};

struct sonde_tls_request_stats {
  __u64 count;
  __u64 duration_sum_ns;                  /* request seen → final response seen */
  __u64 buckets[SONDE_GOTLS_BUCKETS + 1]; /* non-cumulative; the last is > every bound */
};

/* TLS plaintext bytes per process, summed in the kernel. */
struct sonde_tls_bytes {
  __u64 read;
  __u64 written;
};

/* Failed inserts, per map (index of the per-CPU array `counters`). */
enum sonde_gotls_counter {
  SONDE_GOTLS_FULL_PROCESSES = 0, /* a process's bytes and requests not counted */
  SONDE_GOTLS_FULL_REQUESTS,      /* a finished exchange not counted */
  SONDE_GOTLS_FULL_READS,         /* a Read's result not seen */
  SONDE_GOTLS_FULL_EXCHANGES,     /* a request whose response will not be matched */
  SONDE_GOTLS_FULL_CARRIED,       /* a one-byte Read not joined to the next */
  SONDE_GOTLS_COUNTER_COUNT,
};

#define SONDE_GOTLS_MAX_PROCESSES 16384
#define SONDE_GOTLS_MAX_REQUEST_KEYS 65536
#define SONDE_GOTLS_MAX_INFLIGHT 65536
#define SONDE_GOTLS_MAX_CGROUPS 4096

#endif
