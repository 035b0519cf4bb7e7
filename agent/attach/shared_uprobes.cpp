#include "agent/attach/shared_uprobes.h"

#include <vector>

namespace sonde::agent {

bool SharedUprobes::Key::operator<(const Key& o) const {
  auto fields = [](const Key& k) {
    const auto& b = k.binary;
    return std::tie(b.inode, b.size, b.mtime_ns, b.digest_kind, b.digest_size, b.digest,
                    k.file_offset, k.program);
  };
  return fields(*this) < fields(o);
}

Status SharedUprobes::acquire(const Key& key, const std::string& path, pid_t pid,
                              const AttachFn& attach) {
  std::lock_guard lock(mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    ASSIGN_OR_RETURN(auto attachment, attach(path, key.file_offset));
    it = by_key_.emplace(key, Shared{std::move(attachment), {}}).first;
    ++attach_count_;
  }
  it->second.users.insert(pid);
  by_pid_[pid].insert(key);
  return ok_status();
}

void SharedUprobes::release(pid_t pid) {
  std::vector<std::unique_ptr<Attachment>> unused;
  {
    std::lock_guard lock(mu_);
    auto p = by_pid_.find(pid);
    if (p == by_pid_.end()) return;
    for (const auto& key : p->second) {
      auto it = by_key_.find(key);
      if (it == by_key_.end()) continue;
      it->second.users.erase(pid);
      if (it->second.users.empty()) {
        unused.push_back(std::move(it->second.attachment));
        by_key_.erase(it);
      }
    }
    by_pid_.erase(p);
  }
  // Detaching (a syscall per link) happens outside the lock.
  unused.clear();
}

size_t SharedUprobes::size() const {
  std::lock_guard lock(mu_);
  return by_key_.size();
}

uint64_t SharedUprobes::attach_count() const {
  std::lock_guard lock(mu_);
  return attach_count_;
}

}  // namespace sonde::agent
