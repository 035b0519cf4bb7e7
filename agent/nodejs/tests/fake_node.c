/* A position-independent program that looks like Node.js to EventLoopMonitor: it has the two
 * symbols the monitor resolves, and its "default loop" holds, at libuv's backend_fd offset, the
 * epoll fd its main thread then waits on forever. It prints where the loop is and that fd, the
 * ground truth for the address the monitor computes from the PIE's load bias. */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "bpf/nodejs/nodejs.h"

struct fake_loop {
  char before[SONDE_UV_LOOP_BACKEND_FD_OFFSET];
  int backend_fd;
};

struct fake_loop default_loop_struct;

void napi_module_register(void* module) {
  (void)module;
}

int main(void) {
  int epfd = epoll_create1(0);
  if (epfd < 0) return 1;
  default_loop_struct.backend_fd = epfd;
  printf("loop %p %d\n", (void*)&default_loop_struct, epfd);
  fflush(stdout);
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  for (;;) epoll_wait(epfd, &event, 1, -1);
}
