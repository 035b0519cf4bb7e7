/* CPU profile test workload: one hot function. Prints "ready" once running. */
#include <stdio.h>

volatile unsigned long sink;

__attribute__((noinline)) void sonde_hot_c_function(void) {
  for (unsigned long i = 0; i < 100000000ul; ++i) sink += i * i;
}

int main(void) {
  printf("ready\n");
  fflush(stdout);
  for (;;) sonde_hot_c_function();
}
