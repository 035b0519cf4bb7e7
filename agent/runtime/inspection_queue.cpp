#include "agent/runtime/inspection_queue.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace sonde::agent {

struct InspectionQueue::Worker {
  std::thread thread;
  bool busy = false;       // guarded by Shared::mu, as are the fields below
  bool abandoned = false;  // another worker took over; this one exits after its job
  Clock::time_point started;
  std::string key;
};

struct InspectionQueue::Shared {
  std::mutex mu;
  std::condition_variable work;  // a job queued, or stopping
  std::condition_variable idle;  // the live worker has nothing to do
  std::deque<std::pair<std::string, Job>> jobs;
  std::shared_ptr<Worker> current;  // null once too many workers got stuck
  std::set<std::string> stuck_keys;
  size_t stuck_workers = 0;
  uint64_t refused = 0;
  bool stopping = false;

  bool quiet() const { return jobs.empty() && (!current || !current->busy); }
};

InspectionQueue::InspectionQueue(Options options)
    : shared_(std::make_shared<Shared>()), options_(options) {
  std::lock_guard lock(shared_->mu);
  start_worker();
}

InspectionQueue::~InspectionQueue() {
  std::shared_ptr<Worker> worker;
  {
    std::unique_lock lock(shared_->mu);
    shared_->stopping = true;
    shared_->jobs.clear();
    shared_->work.notify_all();
    worker = shared_->current;
    if (worker) {
      // The job in progress may finish; one that hangs is left behind like a stuck one.
      shared_->idle.wait_for(lock, options_.deadline, [&] { return !worker->busy; });
      if (worker->busy) {
        worker->abandoned = true;
        worker->thread.detach();
        return;
      }
    }
  }
  if (worker && worker->thread.joinable()) worker->thread.join();
}

// With shared_->mu held.
void InspectionQueue::start_worker() {
  auto worker = std::make_shared<Worker>();
  shared_->current = worker;
  worker->thread = std::thread([shared = shared_, worker] { work(shared, worker); });
}

void InspectionQueue::work(const std::shared_ptr<Shared>& shared,
                           const std::shared_ptr<Worker>& self) {
  std::unique_lock lock(shared->mu);
  while (true) {
    shared->work.wait(lock, [&] { return shared->stopping || !shared->jobs.empty(); });
    if (shared->stopping) return;
    auto [key, job] = std::move(shared->jobs.front());
    shared->jobs.pop_front();
    self->busy = true;
    self->started = Clock::now();
    self->key = key;
    lock.unlock();
    job();
    job = nullptr;  // what the job holds is released outside the lock
    lock.lock();
    self->busy = false;
    if (self->abandoned) return;  // a new worker has the queue now
    if (shared->quiet()) shared->idle.notify_all();
  }
}

bool InspectionQueue::push(std::string key, Job job) {
  std::lock_guard lock(shared_->mu);
  if (!shared_->current || shared_->stopping || shared_->jobs.size() >= options_.max_queued ||
      (!key.empty() && shared_->stuck_keys.count(key) > 0)) {
    ++shared_->refused;
    return false;
  }
  shared_->jobs.emplace_back(std::move(key), std::move(job));
  shared_->work.notify_one();
  return true;
}

std::vector<std::string> InspectionQueue::check() {
  std::lock_guard lock(shared_->mu);
  auto worker = shared_->current;
  if (!worker || !worker->busy || Clock::now() - worker->started < options_.deadline) return {};
  worker->abandoned = true;
  worker->thread.detach();
  ++shared_->stuck_workers;
  std::vector<std::string> keys;
  if (!worker->key.empty()) {
    shared_->stuck_keys.insert(worker->key);
    keys.push_back(worker->key);
  }
  if (shared_->stuck_workers < options_.max_stuck) {
    start_worker();
    // Jobs for the file that hung would hang the new worker too.
    std::erase_if(shared_->jobs, [&](const auto& j) {
      bool stuck = !j.first.empty() && shared_->stuck_keys.count(j.first) > 0;
      if (stuck) ++shared_->refused;
      return stuck;
    });
  } else {
    shared_->current = nullptr;
    shared_->refused += shared_->jobs.size();
    shared_->jobs.clear();
  }
  shared_->idle.notify_all();
  return keys;
}

InspectionQueue::Stats InspectionQueue::stats() const {
  std::lock_guard lock(shared_->mu);
  return {shared_->jobs.size(), shared_->stuck_workers, shared_->refused, !shared_->current};
}

bool InspectionQueue::drain(Clock::duration timeout) {
  std::unique_lock lock(shared_->mu);
  return shared_->idle.wait_for(lock, timeout, [&] { return shared_->quiet(); });
}

}  // namespace sonde::agent
