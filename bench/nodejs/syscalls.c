// Times N getppid() system calls and prints nanoseconds per call: the cost every process on
// the node pays for the agent's raw syscall tracepoints (the fallback when fentry is absent).
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  printf("%.1f\n", ns / (double)n);
  return 0;
}
