#!/usr/bin/python3
"""A FUSE filesystem that serves real binaries and turns hostile towards one process: the agent.

    hostile_fs.py SOURCE_DIR MOUNTPOINT VICTIM_PID

Every file of SOURCE_DIR (symlinks followed) appears read-only in MOUNTPOINT. Reads by the
process VICTIM_PID (any of its threads) at offsets past the first 8 KiB behave by file name:

    hang-*   never return, until the filesystem is unmounted (a network filesystem whose
             server stopped answering)
    eio-*    fail with EIO (an I/O error: through mmap, the reader gets SIGBUS)

Other readers -- the workload executing the file -- are served normally, so the workload runs
while the agent meets the hostile file. Runs in the foreground until unmounted.
"""
import errno
import os
import sys
import threading

from fusepy import FUSE, FuseOSError, Operations, fuse_get_context

SAFE_PREFIX = 8192


def tgid_of(tid):
    try:
        with open(f"/proc/{tid}/status") as f:
            for line in f:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Hostile(Operations):
    def __init__(self, root, victim):
        self.root = root
        self.victim = victim
        self.never = threading.Event()

    def _path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        st = os.stat(self._path(path))
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime", "st_mtime",
                "st_ctime")
        attrs = {k: getattr(st, k) for k in keys}
        attrs["st_mode"] &= ~0o222
        return attrs

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        return os.open(self._path(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        name = os.path.basename(path)
        if offset + size > SAFE_PREFIX and tgid_of(fuse_get_context()[2]) == self.victim:
            if name.startswith("hang-"):
                self.never.wait()
            if name.startswith("eio-"):
                raise FuseOSError(errno.EIO)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)


if __name__ == "__main__":
    source, mountpoint, victim = sys.argv[1], sys.argv[2], int(sys.argv[3])
    FUSE(Hostile(source, victim), mountpoint, foreground=True, nothreads=False, ro=True,
         allow_other=True)
