// Times N system calls and prints nanoseconds per call: the cost every process on the node pays
// for the agent's wait hook. `getppid` (default): any system call, which only the raw syscall
// tracepoints (the last-resort hook) see; `epoll`: an epoll_wait with a zero timeout on an
// empty epoll fd, which every hook sees (the Node.js probes look the process up).
//   syscalls [N] [getppid|epoll]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int epoll = argc > 2 && strcmp(argv[2], "epoll") == 0;
  int epfd = epoll ? epoll_create1(0) : -1;
  struct epoll_event ev;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) {
    if (epoll) {
      epoll_wait(epfd, &ev, 1, 0);
    } else {
      syscall(SYS_getppid);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  printf("%.1f\n", ns / (double)n);
  return 0;
}
