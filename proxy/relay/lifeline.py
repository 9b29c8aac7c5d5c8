"""A child process that dies with its parent: the server processes of
``chatmend serve --workers`` and the offload workers of every server process.

Two mechanisms, because one is not portable and the other not immediate:

* ``die_with_parent()``: Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes, so the
  kernel kills the child the moment its parent dies, whatever the child is doing (a no-op
  elsewhere, or if libc cannot be loaded).
* ``Lifeline``: a pipe whose write end only the parent holds; the child watches the read end
  (``watch``: a daemon thread) and exits when it reads end-of-file, which the kernel delivers
  when the parent is gone, on any POSIX system.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading

#: From <sys/prctl.h>.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux). ``parent``: the pid
    the caller knows as its parent; if it is already gone (the parent died before the call),
    exit now. ``False`` where the call is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent is not None and os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect
    return True


class Lifeline:
    """A pipe from a parent to the children it forks: the parent keeps ``writer`` open for its
    whole life and never writes; each child closes ``writer`` and calls ``watch``."""

    def __init__(self) -> None:
        self.reader, self.writer = os.pipe()

    def watch(self) -> None:
        """In the child: close the parent's end, then exit as soon as the parent is gone."""
        os.close(self.writer)
        threading.Thread(target=_wait_eof, args=(self.reader,), daemon=True).start()

    def close(self) -> None:
        for fd in (self.reader, self.writer):
            with contextlib.suppress(OSError):
                os.close(fd)


def _wait_eof(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os._exit(1)  # the parent is gone: nothing of ours is worth finishing
