// InspectionQueue: runs the agent's work that touches tenants' files -- opening a process's
// executable, parsing it, reading its build info -- off the event thread, in submission order,
// under a deadline.
//
// A file can hang every read (a FUSE or NFS server that stops answering), and a thread blocked
// in such a read cannot be interrupted. So a worker whose job runs past the deadline is
// abandoned: it keeps its thread (there is no way to take it back) and a new worker carries on
// with the queue. At most `max_stuck` workers may be abandoned; after that no job runs any more,
// and jobs are refused (counted) instead of stalling the agent. The key of a job that got stuck
// is remembered, and jobs with a remembered key are refused at once.
//
// Jobs must be safe to finish late: an abandoned job may complete long after its deadline, on
// its own thread (what it touches must be thread-safe and outlive the queue, or the process).
//
// Thread-safety: push(), check() and stats() may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sonde::agent {

class InspectionQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Job = std::function<void()>;

  struct Options {
    Clock::duration deadline = std::chrono::seconds(5);
    size_t max_stuck = 4;      // abandoned workers, at most
    size_t max_queued = 4096;  // pending jobs, at most
  };
  explicit InspectionQueue(Options options);
  // Stops the worker after its current job; an abandoned worker is left to the process's exit.
  ~InspectionQueue();
  InspectionQueue(const InspectionQueue&) = delete;
  InspectionQueue& operator=(const InspectionQueue&) = delete;

  // Queues `job`; `key` names what it touches (e.g. the executable's device:inode), "" for a job
  // that touches no tenant file. Returns false when the job was refused: queue full, too many
  // stuck workers, or `key` got stuck before.
  bool push(std::string key, Job job);

  // Abandons a worker whose job has run past the deadline and starts another. Returns the keys
  // of the jobs abandoned by this call. Call it periodically (the event loop does).
  std::vector<std::string> check();

  struct Stats {
    size_t queued = 0;
    size_t stuck_workers = 0;
    uint64_t refused = 0;    // jobs not run: full queue, stuck key, or no worker left
    bool exhausted = false;  // max_stuck workers got stuck: no job runs any more
  };
  Stats stats() const;

  // Waits until every job queued so far has run (or a worker got stuck on one). For tests and
  // for orderly hand-offs; returns false on timeout.
  bool drain(Clock::duration timeout);

 private:
  struct Shared;
  struct Worker;
  void start_worker();
  static void work(const std::shared_ptr<Shared>& shared, const std::shared_ptr<Worker>& self);
  std::shared_ptr<Shared> shared_;
  Options options_;
};

}  // namespace sonde::agent
