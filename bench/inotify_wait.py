"""Waiting for a file to change, woken by inotify rather than by polling (so the measurement adds
no polling delay of its own)."""
import ctypes, os, select, struct, time

_libc = ctypes.CDLL(None, use_errno=True)
IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE, IN_MODIFY = 0x8, 0x80, 0x100, 0x2


class DirectoryWatch:
    def __init__(self, directory):
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if _libc.inotify_add_watch(self.fd, directory.encode(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_MODIFY) < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")

    def wait_until(self, condition, timeout):
        """Calls condition() after each batch of events (and once first) until it is true."""
        deadline = time.monotonic() + timeout
        while True:
            if condition():
                return time.monotonic()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("condition not met")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                try:
                    os.read(self.fd, 65536)
                except BlockingIOError:
                    pass

    def close(self):
        os.close(self.fd)


IN_MOVED_FROM, IN_DELETE, IN_ISDIR, IN_Q_OVERFLOW = 0x40, 0x200, 0x40000000, 0x4000
_EVENT = struct.Struct("iIII")
_TEMPORARY = (".sinki-tmp-", ".syncthing.", "~syncthing~", ".unison.", ".~tmp~")


def _temporary(name):
    # "#12345": the kernel's name for an O_TMPFILE inode, written before it is linked under its own.
    return name.startswith(_TEMPORARY) or (name.startswith(".") and ".tmp" in name) or name.startswith("#")


class TreeCounter:
    """Counts the regular files below a folder as they appear, with a recursive inotify watch, so
    that waiting for a sync to finish neither polls nor walks the tree (a walk every few
    milliseconds would take a core from the tools measured). Temporary names are left out."""

    def __init__(self, root):
        self.fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = {}
        self.files = set()
        self._add_tree(root)

    def _add_tree(self, top):
        stack = [top]
        while stack:
            path = stack.pop()
            wd = _libc.inotify_add_watch(self.fd, path.encode(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_DELETE)
            if wd < 0:
                continue  # gone again
            self.dirs[wd] = path
            try:
                with os.scandir(path) as it:
                    for e in it:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False) and not _temporary(e.name):
                            self.files.add(e.path)
            except FileNotFoundError:
                pass

    def _read(self):
        try:
            data = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        offset = 0
        while offset < len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0").decode(errors="surrogateescape")
            offset += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                # Events were dropped: count again from the disk.
                self.files.clear()
                for path in list(self.dirs.values()):
                    self._add_tree(path)
                continue
            parent = self.dirs.get(wd)
            if parent is None or not name:
                continue
            path = os.path.join(parent, name)
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO):
                    self._add_tree(path)
            elif _temporary(name):
                continue
            elif mask & (IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE):
                self.files.add(path)
            elif mask & (IN_MOVED_FROM | IN_DELETE):
                self.files.discard(path)

    def wait_for(self, expected, timeout):
        """The monotonic time at which at least `expected` files were there."""
        deadline = time.monotonic() + timeout
        while len(self.files) < expected:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"only {len(self.files)} of {expected} files arrived")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                self._read()
        return time.monotonic()

    def close(self):
        os.close(self.fd)
