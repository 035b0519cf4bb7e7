/* A position-independent program that looks like a Node.js binary to the thread-pool monitor:
 * napi_module_register and libuv's thread-pool statics under their names, holding a pool of 4
 * threads, 1 idle, and 3 tasks queued (2 in wq around the slow-work marker, 1 slow I/O task).
 * Built PIE, so the monitor must add the load bias from /proc/<pid>/maps. Variants (the
 * verdicts): -DNO_SLOW_QUEUE leaves slow_io_pending_wq out, -DSMALL_WQ makes wq 8 bytes, and
 * linking fake_pool_twin.c as well defines a second `wq`. */
#include <stdio.h>
#include <unistd.h>

struct queue {
  struct queue* next;
  struct queue* prev;
};

static unsigned int nthreads;
static unsigned int idle_threads;
#ifdef SMALL_WQ
static struct queue* wq;
#else
static struct queue wq;
#endif
#ifndef NO_SLOW_QUEUE
static struct queue slow_io_pending_wq;
#endif
static struct queue run_slow_work_message;
static struct queue exit_message;
static struct queue tasks[3];

void napi_module_register(void* module) {
  (void)module;
}

static void link_queue(struct queue* head, struct queue** nodes, int n) {
  head->next = n ? nodes[0] : head;
  head->prev = n ? nodes[n - 1] : head;
  for (int i = 0; i < n; ++i) {
    nodes[i]->next = i + 1 < n ? nodes[i + 1] : head;
    nodes[i]->prev = i ? nodes[i - 1] : head;
  }
}

int main(void) {
  nthreads = 4;
  idle_threads = 1;
  run_slow_work_message.next = run_slow_work_message.prev = &run_slow_work_message;
  exit_message.next = exit_message.prev = &exit_message;
#ifdef SMALL_WQ
  wq = &tasks[0];
#else
  struct queue* in_wq[] = {&tasks[0], &run_slow_work_message, &tasks[1]};
  link_queue(&wq, in_wq, 3);
#endif
#ifndef NO_SLOW_QUEUE
  struct queue* slow[] = {&tasks[2]};
  link_queue(&slow_io_pending_wq, slow, 1);
#endif
  printf("ready %p\n", (void*)&nthreads);
  fflush(stdout);
  for (;;) pause();
}
