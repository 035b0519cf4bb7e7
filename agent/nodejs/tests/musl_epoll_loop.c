/* A program with its own epoll loop, for the libc-uprobes wait hook's tests: built against musl
 * (no Node.js here is) and against glibc (a process mapping node's libc.so.6).
 * Usage: musl_epoll_loop COUNT BLOCK_MS IDLE_MS [fork]
 *
 * Prints "ready" and waits for SIGUSR1 (outside epoll, so a test can hook it before its first
 * wait), then COUNT times: waits in epoll_wait for a timerfd that fires after IDLE_MS
 * (idle), then spins BLOCK_MS on the CPU without a system call (the loop is blocked). After the
 * last block it prints "done busy_ms=<own count>" -- its own measure of the time spent outside
 * epoll_wait from the first wait's return to the last block's end -- and waits in epoll_wait
 * until it is killed. With "fork", before "done" it forks a child that calls epoll_wait
 * (timeout 0) three times and then pauses until killed (it dies with its parent); the line
 * then says " child=<pid>" once the child has made those calls. The line ends " tail_ms=<time>"
 * from the last block's end to the line: outside epoll too (the fork and the wait for the
 * child, which a loaded machine can make long), but not in busy_ms. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && strcmp(argv[4], "fork") == 0)) return 2;
  int count = atoi(argv[1]);
  uint64_t block_ns = (uint64_t)atoi(argv[2]) * 1000000u;
  long idle_ms = atol(argv[3]);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = timer};
  if (ep < 0 || timer < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev) != 0) return 1;
  sigset_t go;
  sigemptyset(&go);
  sigaddset(&go, SIGUSR1);
  sigprocmask(SIG_BLOCK, &go, NULL);
  printf("ready\n");
  fflush(stdout);
  int sig = 0;
  if (sigwait(&go, &sig) != 0) return 1;
  uint64_t busy = 0;
  uint64_t last_end = now_ns();
  for (int i = 0; i < count; i++) {
    struct itimerspec at = {.it_value = {idle_ms / 1000, (idle_ms % 1000) * 1000000}};
    timerfd_settime(timer, 0, &at, NULL);
    struct epoll_event out;
    if (epoll_wait(ep, &out, 1, -1) != 1) return 1;
    uint64_t woke = now_ns();
    uint64_t expirations;
    if (read(timer, &expirations, sizeof expirations) != sizeof expirations) return 1;
    while (now_ns() - woke < block_ns) {
    }
    last_end = now_ns();
    busy += last_end - woke;
  }
  pid_t child = 0;
  if (argc == 5) {
    int done[2];
    if (pipe(done) != 0) return 1;
    child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      struct epoll_event out;
      for (int i = 0; i < 3; i++) epoll_wait(ep, &out, 1, 0);
      char c = 'w';
      if (write(done[1], &c, 1) != 1) _exit(1);
      for (;;) pause();
    }
    char c;
    if (read(done[0], &c, 1) != 1) return 1;
  }
  double tail_ms = (double)(now_ns() - last_end) / 1e6;
  if (child > 0) {
    printf("done busy_ms=%.3f child=%d tail_ms=%.3f\n", (double)busy / 1e6, (int)child, tail_ms);
  } else {
    printf("done busy_ms=%.3f tail_ms=%.3f\n", (double)busy / 1e6, tail_ms);
  }
  fflush(stdout);
  struct epoll_event out;
  epoll_wait(ep, &out, 1, -1);
  return 0;
}
