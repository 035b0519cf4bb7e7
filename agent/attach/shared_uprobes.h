// SharedUprobes: one uprobe attachment per (real file, offset, program), shared by every
// process that runs the file and reference-counted by their pids.
//
// Two pods of one image reach the same lower-layer file through two overlay mounts (same
// inode, different st_dev); a uprobe attached through either lands on the real inode and fires
// for both. Attaching once per path would count every event twice, so attachments are keyed by
// BinaryIdentity (which ignores the mount) and never by path. Per-process filtering happens in
// the kernel through the feature's tracked-process map.
//
// Thread-safety: all methods may be called concurrently. Attachment happens under the lock so
// two threads can never attach the same key twice.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "agent/kernel/bpf_helpers.h"
#include "agent/symbols/binary_identity.h"
#include "common/result.h"

namespace sonde::agent {

class SharedUprobes {
 public:
  // Attaches `program` at `file_offset` of the file at `path` for all processes.
  using AttachFn =
      std::function<Result<std::unique_ptr<Attachment>>(const std::string& path, uint64_t offset)>;

  struct Key {
    symbols::BinaryIdentity binary;
    uint64_t file_offset = 0;
    std::string program;  // e.g. "gotls/read"
    bool operator<(const Key& o) const;
  };

  // Adds `pid` as a user of the attachment for `key`, attaching through `path` (a path valid
  // now, such as /proc/<pid>/exe) when it is the first user. On failure nothing is recorded.
  Status acquire(const Key& key, const std::string& path, pid_t pid, const AttachFn& attach);

  // Removes `pid` from every attachment it uses; attachments left without users detach.
  void release(pid_t pid);

  // Attachments alive now.
  size_t size() const;
  // Attachments made since construction (a second pod of an image must not add one).
  uint64_t attach_count() const;

 private:
  struct Shared {
    std::unique_ptr<Attachment> attachment;
    std::set<pid_t> users;
  };
  mutable std::mutex mu_;
  std::map<Key, Shared> by_key_;
  std::map<pid_t, std::set<Key>> by_pid_;
  uint64_t attach_count_ = 0;
};

}  // namespace sonde::agent
