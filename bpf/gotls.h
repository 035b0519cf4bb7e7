/* Go crypto/tls instrumentation, shared by bpf/gotls.bpf.c and the agent (C only).
 *
 * Only protocol metadata leaves the kernel: direction, HTTP method, status code, protocol and
 * timings. The plaintext is peeked at (SONDE_GOTLS_PEEK bytes) inside the BPF program and
 * never copied to a map, a ring buffer or user space.
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
  SONDE_HTTP_OTHER = 0,
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
  SONDE_TLS_HTTP1 = 1, /* one event per request/response exchange */
  SONDE_TLS_HTTP2 = 2, /* one event per connection (its preface); streams are not parsed */
};

/* One finished HTTP/1.x exchange, or one HTTP/2 connection. */
struct sonde_tls_event {
  __u64 duration_ns; /* request seen → response seen; 0 for HTTP/2 */
  __u32 pid;
  __u16 direction; /* enum sonde_tls_direction */
  __u16 protocol;  /* enum sonde_tls_protocol */
  __u16 method;    /* enum sonde_http_method */
  __u16 status;    /* HTTP status code, 0 when unknown */
  __u32 pad;
};

/* TLS plaintext bytes per process, summed in the kernel. */
struct sonde_tls_bytes {
  __u64 read;
  __u64 written;
};

#define SONDE_GOTLS_MAX_PROCESSES 16384
#define SONDE_GOTLS_MAX_INFLIGHT 65536

#endif
