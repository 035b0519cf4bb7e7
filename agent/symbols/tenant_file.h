// Opening files that a tenant's process names, from the agent (root, in the host's namespaces).
//
// A path read from /proc/<pid>/maps or built for a process (its perf map) is the tenant's: it
// can be renamed, swapped (renameat2 RENAME_EXCHANGE) or made a symlink between the moment the
// agent reads it and the moment it opens it. Opened naively through /proc/<pid>/root + path:
//   - a FIFO swapped in blocks open(2) until a writer comes (an inspection worker hangs, and
//     four hang the pool);
//   - a device node or a file of another tenant is opened instead of the mapped file;
//   - an absolute symlink in any component resolves against the *agent's* root, so
//     /tmp -> /proc/<host-pid>/root/tmp reads another container's files.
// The functions here never block on such a file (O_NONBLOCK, and only regular files are kept),
// resolve every path inside the process's own root (openat2 RESOLVE_IN_ROOT, no magic links),
// and for a mapped file accept only the device and inode the mapping shows.
//
// Cost: an open of the root directory, one openat2 and one fstat (or one open and one fstat
// through map_files). Kernel: openat2 needs Linux 5.6; before it, opening by path fails with
// the reason instead of falling back to an unsafe open.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sonde::symbols {

// A file mapping as one line of /proc/<pid>/maps shows it.
struct MappedFileRef {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t dev = 0;  // makedev(major, minor) of the maps line's "major:minor"
  uint64_t inode = 0;
  std::string path;  // as the process sees it (in its mount namespace)
};

// The mapping of one maps line ("start-end perms offset major:minor inode path"); nullopt for a
// malformed line or one that maps no file (anonymous, [heap], [vdso], inode 0).
std::optional<MappedFileRef> parse_mapped_file(std::string_view maps_line);

// `path` (absolute, as `pid` sees it) opened read-only inside pid's root directory
// (<proc_root>/<pid>/root): symlinks, "..", absolute or not, stay inside that root, magic links
// (/proc/<pid>/root, /proc/<pid>/fd/N) are refused. Never blocks: a FIFO, socket or device is
// refused (EINVAL-coded Error) without waiting for a peer.
Result<UniqueFd> open_in_root(const std::string& proc_root, pid_t pid, const std::string& path);

// The very file `m` maps in `pid`, read-only: through /proc/<pid>/map_files/<start>-<end>,
// which opens the mapped file itself whatever its path names now. Where that fails (map_files
// needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the initial user namespace; the mapping may
// be gone), or when `use_map_files` is false, through open_in_root(m.path), accepted only if it
// is a regular file on the mapping's device and inode (an Error coded ESTALE otherwise: the
// path was replaced).
Result<UniqueFd> open_mapped_file(const std::string& proc_root, pid_t pid, const MappedFileRef& m,
                                  bool use_map_files = true);

}  // namespace sonde::symbols
