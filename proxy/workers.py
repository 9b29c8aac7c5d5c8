"""``chatmend serve --workers N``: pre-fork N server processes on one listening socket.

The parent binds the socket, forks the workers (each runs its own event loop and app on the
inherited socket; the kernel hands each new connection to one of them) and supervises them:

* SIGHUP: the parent validates the config once (an invalid one is logged and goes no further)
  and passes the signal on; each worker reloads it.
* SIGTERM or SIGINT: passed on; each worker stops accepting, drains for up to
  ``drain_seconds``, and exits; the parent exits when all have (a worker still running
  ``KILL_AFTER_DRAIN`` seconds past the deadline is killed).
* A worker that dies otherwise is replaced (at most ``MAX_RESPAWNS`` within a minute, then the
  parent stops the rest and exits 1: something is wrong that restarting will not fix).

Metrics stay correct across processes with prometheus-client's multiprocess mode: each worker
writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR`` (a fresh temporary directory unless
the operator names one) and ``/metrics`` on any worker sums them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from prometheus_client import multiprocess, values

from proxy.log import get_logger

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
MAX_RESPAWNS = 10
KILL_AFTER_DRAIN = 5.0
_FORWARDED = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)

log = get_logger()


def bind(host: str, port: int) -> socket.socket:
    """The listening socket all workers share (inheritable across fork)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.set_inheritable(True)
    return sock


def enable_multiprocess_metrics() -> Path | None:
    """Point prometheus-client at a shared directory before any metric exists; return it if
    chatmend created it (and so removes it at exit)."""
    given = os.environ.get(MULTIPROC_ENV)
    directory = Path(given) if given else Path(tempfile.mkdtemp(prefix="chatmend-metrics-"))
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):  # samples of an earlier run would be summed in
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(directory)
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    return None if given else directory


def run_workers(
    count: int,
    sock: socket.socket,
    serve_one: Callable[[socket.socket, int], int],
    validate: Callable[[], bool],
    drain_seconds: float,
) -> int:
    """Fork ``count`` workers running ``serve_one(sock, index)``; supervise until they exit."""
    created = enable_multiprocess_metrics()
    children: dict[int, int] = {}
    stopping = False
    respawns: list[float] = []

    def spawn(index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                for signum in _FORWARDED:
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until its loop handles it
                code = serve_one(sock, index)
            except Exception as exc:
                log.error("worker_failed", worker=index, error=type(exc).__name__)
            finally:
                os._exit(code)
        children[pid] = index

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if signum == signal.SIGHUP and not validate():
            return  # logged by validate; the workers keep their config
        if signum != signal.SIGHUP and not stopping:
            stopping = True
            signal.setitimer(signal.ITIMER_REAL, drain_seconds + KILL_AFTER_DRAIN)
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM if signum == signal.SIGINT else signum)

    def kill_stragglers(signum: int, frame: FrameType | None) -> None:
        for pid in list(children):
            log.error("worker_killed", pid=pid, worker=children[pid], reason="drain_overrun")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    signal.signal(signal.SIGALRM, kill_stragglers)
    for index in range(count):
        spawn(index)
    log.info("workers_started", workers=count, pids=sorted(children))
    code = 0
    try:
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            if pid not in children:
                continue
            index = children.pop(pid)
            multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
            if stopping:
                continue
            exit_code = os.waitstatus_to_exitcode(status)
            log.error("worker_exited", pid=pid, worker=index, exit_code=exit_code)
            now = time.monotonic()
            respawns[:] = [t for t in respawns if now - t < 60] + [now]
            if len(respawns) > MAX_RESPAWNS:
                log.error("workers_failing", respawns=len(respawns), window_seconds=60)
                code = 1
                forward(signal.SIGTERM, None)
                continue
            spawn(index)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sock.close()
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
    log.info("workers_stopped", exit_code=code)
    return code
