"""Subprocess plumbing for the benchmarks: free ports, readiness, RSS, and a ``Fleet`` of servers.

Every server runs in its own session (process group), so a terminal Ctrl-C reaches only the
driver, whose ``finally`` stops the group (SIGTERM, then SIGKILL after a grace period). On
Linux each child also gets ``PR_SET_PDEATHSIG``: if the driver is killed outright, the kernel
sends the child SIGTERM. ``handle_sigterm()`` turns SIGTERM to the driver into ``SystemExit``
so the ``finally`` blocks run then too.

Not run on its own; used by ``bench.http``, ``bench.streams``, ``bench.loops``, ``bench.peers``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path
from types import FrameType

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 (it is released before the server binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def venv_bin(name: str) -> str:
    """Path of a console script installed next to this interpreter."""
    return str(Path(sys.executable).with_name(name))


@cache
def chatmend_has_loop_flag() -> bool:
    """Whether ``chatmend serve`` accepts ``--loop`` (newer versions do)."""
    try:
        out = subprocess.run(
            [venv_bin("chatmend"), "serve", "--help"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--loop" in out


@cache
def uvloop_available() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def rss_kb(pid: int, field: str = "VmRSS") -> int | None:
    """A ``/proc/PID/status`` memory field in kB (``VmRSS`` now, ``VmHWM`` the peak)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _child_setup() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc_name = ctypes.util.find_library("c")
        if libc_name:
            with suppress(OSError, AttributeError):
                ctypes.CDLL(libc_name, use_errno=True).prctl(
                    _PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0
                )


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def handle_sigterm() -> None:
    """Make SIGTERM unwind the driver like Ctrl-C does (so servers are stopped)."""
    signal.signal(signal.SIGTERM, _raise_exit)


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process group, SIGKILL it if it is still there after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # A server's own children (e.g. uvicorn workers) share its group: make sure none is left.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def wait_tcp(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Wait until something accepts connections on ``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start within {timeout:.0f} s")


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Wait until ``GET url`` answers with any HTTP status below 500."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


class Fleet:
    """Named server subprocesses; ``fleet()`` stops them all on exit."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(
        self,
        name: str,
        command: Sequence[str],
        port: int,
        *,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        ready: Callable[[subprocess.Popen[bytes]], None] | None = None,
    ) -> str:
        """Start ``command`` (which must listen on ``port``), wait until ready, return its URL.

        stdout (chatmend's JSON request log, for instance) goes to ``log`` or /dev/null.
        """
        out = log.open("ab") if log else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(
                list(command),
                stdout=out,
                stderr=out if log else None,
                env=env,
                start_new_session=True,
                preexec_fn=_child_setup,  # noqa: PLW1509 - only prctl, no locks or threads
            )
        finally:
            if log and not isinstance(out, int):
                out.close()
        self.procs[name] = proc
        url = f"http://127.0.0.1:{port}"
        self.urls[name] = url
        (ready or (lambda p: wait_tcp(port, p)))(proc)
        return url

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def stop_all(self) -> None:
        for proc in self.procs.values():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            stop(proc)


@contextmanager
def fleet() -> Iterator[Fleet]:
    f = Fleet()
    try:
        yield f
    finally:
        f.stop_all()
