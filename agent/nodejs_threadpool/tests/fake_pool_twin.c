/* A second translation unit with its own static `wq`: linked into fake_pool, the binary has two
 * definitions of the name at different addresses, and the monitor must not pick one. */
struct queue {
  struct queue* next;
  struct queue* prev;
};

static struct queue wq;

void* twin_wq(void) {
  return &wq;
}
