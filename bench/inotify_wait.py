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
