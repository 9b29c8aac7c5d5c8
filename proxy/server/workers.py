"""``chatmend serve --workers N``: pre-fork N server processes on one listening socket.

The parent binds the socket, forks the workers (each runs its own event loop and app on the
inherited socket; the kernel hands each new connection to one of them) and supervises them:

* SIGHUP: the parent validates the config once (an invalid one is logged and goes no further)
  and passes the signal on; each worker reloads it.
* Its signal handlers only note the signal; the supervising loop acts on it.
* The workers die with the parent, however it ends (SIGKILL included): a parent-death signal
  on Linux, and everywhere a pipe whose end-of-file they watch (``proxy.relay.lifeline``).
* SIGTERM or SIGINT: passed on; each worker stops accepting, drains for up to
  ``drain_seconds``, and exits; the parent exits when all have (a worker still running
  ``KILL_AFTER_DRAIN`` seconds past the deadline is killed).
* A worker that dies otherwise is replaced (at most ``MAX_RESPAWNS`` within a minute, then the
  parent stops the rest and exits 1: something is wrong that restarting will not fix).

Each worker also listens on a unix socket of its own, in a temporary directory the parent makes
and removes: a worker relays there the requests of a session another worker keeps
(``proxy.relay.owners``; ``prefix_cache.route_sessions``).

Metrics stay correct across processes with prometheus-client's multiprocess mode: each worker
writes its samples to files in ``PROMETHEUS_MULTIPROC_DIR`` (a fresh temporary directory unless
the operator names one) and ``/metrics`` on any worker sums them all.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from prometheus_client import multiprocess, values

from proxy.observe.log import get_logger
from proxy.relay.lifeline import Lifeline, die_with_parent
from proxy.relay.owners import Workers

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
    serve_one: Callable[[socket.socket, Workers], int],
    validate: Callable[[], bool],
    drain_seconds: float,
) -> int:
    """Fork ``count`` workers running ``serve_one(sock, workers)`` (``workers``: which one it
    is, and where each listens for its peers); supervise until they exit."""
    created = enable_multiprocess_metrics()
    sockets = Path(tempfile.mkdtemp(prefix="chatmend-workers-"))
    supervisor = _Supervisor(count, sock, serve_one, validate, drain_seconds, sockets=sockets)
    try:
        code = supervisor.run()
    finally:
        sock.close()
        shutil.rmtree(sockets, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
    log.info("workers_stopped", exit_code=code)
    return code


class _Supervisor:
    """The parent of ``--workers``. Its signal handlers only note the signal (``_noted``); the
    loop in ``run`` acts on it: a YAML load, a log line or a lock taken inside a handler could
    deadlock against the same work interrupted in the main flow (structlog's logger holds a
    non-reentrant lock). Signals wake the loop through ``signal.set_wakeup_fd``."""

    def __init__(
        self,
        count: int,
        sock: socket.socket,
        serve_one: Callable[[socket.socket, Workers], int],
        validate: Callable[[], bool],
        drain_seconds: float,
        *,
        sockets: Path,
    ) -> None:
        self.count = count
        self.sockets = sockets
        self.sock = sock
        self.serve_one = serve_one
        self.validate = validate
        self.drain_seconds = drain_seconds
        self.children: dict[int, int] = {}
        self.stopping = False
        self.code = 0
        self.respawns: list[float] = []
        self.kill_at: float | None = None
        #: Signals received and not yet handled, in order.
        self.noted: list[int] = []
        #: Workers exit when this pipe's write end (held here only) closes: the portable
        #: half of "workers die with their supervisor" (``proxy.relay.lifeline``).
        self.lifeline = Lifeline()
        self.pid = os.getpid()

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        self.noted.append(signum)  # nothing else here: the loop acts on it

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for signum in (*_FORWARDED, signal.SIGCHLD):
            signal.signal(signum, self._noted)
        try:
            for index in range(self.count):
                self._spawn(index)
            log.info("workers_started", workers=self.count, pids=sorted(self.children))
            while self.children:
                timeout = 1.0
                if self.kill_at is not None:
                    timeout = max(0.0, min(timeout, self.kill_at - time.monotonic()))
                with contextlib.suppress(InterruptedError):
                    select.select([wake_r], [], [], timeout)
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 512):
                        pass
                self._handle_signals()
                self._reap()
                if self.kill_at is not None and time.monotonic() >= self.kill_at:
                    self._kill_stragglers()
        finally:
            signal.set_wakeup_fd(previous)
            for signum in (*_FORWARDED, signal.SIGCHLD):
                signal.signal(signum, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            self.lifeline.close()
        return self.code

    def _spawn(self, index: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 1
            try:
                signal.set_wakeup_fd(-1)
                for signum in (*_FORWARDED, signal.SIGCHLD):
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until its loop handles it
                die_with_parent(self.pid)  # Linux: the kernel kills it with its supervisor
                self.lifeline.watch()  # anywhere: it exits when the supervisor's pipe closes
                code = self.serve_one(self.sock, Workers(self.sockets, self.count, index))
            except Exception as exc:
                log.error("worker_failed", worker=index, error=type(exc).__name__)
            finally:
                os._exit(code)
        self.children[pid] = index

    def _handle_signals(self) -> None:
        while self.noted:
            signum = self.noted.pop(0)
            if signum == signal.SIGCHLD:
                continue  # reaped below
            if signum == signal.SIGHUP and not self.validate():
                continue  # logged by validate; the workers keep their config
            self._forward(signum)

    def _forward(self, signum: int) -> None:
        if signum != signal.SIGHUP and not self.stopping:
            self.stopping = True
            self.kill_at = time.monotonic() + self.drain_seconds + KILL_AFTER_DRAIN
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM if signum == signal.SIGINT else signum)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            if pid not in self.children:
                continue
            index = self.children.pop(pid)
            multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
            if self.stopping:
                continue
            exit_code = os.waitstatus_to_exitcode(status)
            log.error("worker_exited", pid=pid, worker=index, exit_code=exit_code)
            now = time.monotonic()
            self.respawns[:] = [t for t in self.respawns if now - t < 60] + [now]
            if len(self.respawns) > MAX_RESPAWNS:
                log.error("workers_failing", respawns=len(self.respawns), window_seconds=60)
                self.code = 1
                self._forward(signal.SIGTERM)
                continue
            self._spawn(index)

    def _kill_stragglers(self) -> None:
        self.kill_at = None
        for pid in list(self.children):
            log.error("worker_killed", pid=pid, worker=self.children[pid], reason="drain_overrun")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
