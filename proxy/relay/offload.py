"""Big request bodies repaired in worker processes, so the event loop keeps answering.

A body over ``offload_body_bytes`` (decoded) is parsed and repaired in a small pool of worker
processes (``offload_processes``): no client waits on another's CPU, orjson's parse included
(it holds the GIL, so a thread would stall the loop as much). Small bodies stay inline: the
round trip (the body pickled both ways) would cost more than their repair.

The pool is fair and bounded:

* **Each job ends at its deadline.** The caller's deadline (``sanitize_deadline``) goes with
  the job: the worker arms a timer for it, and a caller that gives up first interrupts the job
  at once (SIGUSR1). A worker that has not stopped ``KILL_GRACE`` seconds later is killed and
  replaced; one that dies mid-job (killed, out of memory) is replaced too. Only its own job
  fails (the request then goes as it came); the next job gets a fresh worker. Counted:
  ``chatmend_offload_interrupted_total``, ``chatmend_offload_replaced_total{reason}``.
* **One client cannot take the pool.** A body over ``BIG_FACTOR`` times ``offload_body_bytes``
  is *big*: big jobs hold at most half the workers (at least one), and a free worker takes a
  waiting small job before a big one. So with two workers (the default), ordinary offloaded
  bodies keep one worker however many huge bodies queue; with one, they wait behind at most
  the running big job (bounded by its deadline).
* **The answer that crosses back is small.** The worker keeps the first ``MAX_CHANGES``
  changes and counts the rest by rule and action (``Sanitized.omitted``): the loop unpickles a
  thousand changes, not a hundred thousand, and the metrics add counts, not changes.

Workers start on demand (one at ``chatmend serve``'s start, the rest when a job would wait),
and die with the server process (``proxy.relay.lifeline``: parent-death signal, and end-of-file on
their job pipe).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import pickle
import signal
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any
from weakref import WeakKeyDictionary

from proxy.observe.log import get_logger
from proxy.observe.metrics import Metrics
from proxy.relay.lifeline import die_with_parent
from rules.engine.base import RequestFacts
from rules.providers.planner import Planner
from rules.providers.sanitize import Sanitized, capped, sanitize_body

log = get_logger()

#: Planners a worker has unpickled, by digest (one per route and config generation).
_PLANNERS: dict[bytes, Planner] = {}
_MAX_PLANNERS = 32
#: A body over this many times ``offload_body_bytes`` is big (see the module's docstring).
BIG_FACTOR = 8
#: Seconds a worker has to stop after its job's deadline before it is killed and replaced.
KILL_GRACE = 2.0
#: Changes a worker sends back in full; the rest are counted by rule and action.
MAX_CHANGES = 1000


class WorkerDied(Exception):
    """The worker running the job died (or was killed): the job is lost, the worker replaced."""


class JobInterrupted(BaseException):
    """Raised inside a worker when its job's deadline passed or its caller gave up. A
    ``BaseException``, so that no ``except Exception`` on the way (the pipeline skips a rule
    that raises one, fail-open) can swallow it and let the job run on."""


@dataclass(eq=False, slots=True)
class _Worker:
    process: BaseProcess
    conn: Connection
    big: bool = False


class Offloader:
    """The app's pool of worker processes (none until the first big body, or ``start``)."""

    def __init__(
        self,
        processes: int,
        offload_body_bytes: int = 1024 * 1024,
        metrics: Metrics | None = None,
    ) -> None:
        self.processes = processes
        self.metrics = metrics
        self.big_bytes = offload_body_bytes * BIG_FACTOR
        #: Big jobs running at once, at most: half the pool, at least one.
        self.big_share = max(1, processes // 2)
        self._pickled: WeakKeyDictionary[Planner, tuple[bytes, bytes]] = WeakKeyDictionary()
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()
        self._big_running = 0
        #: Callers waiting for a worker, per lane (each a future the worker is handed through).
        self._small: deque[asyncio.Future[_Worker]] = deque()
        self._big: deque[asyncio.Future[_Worker]] = deque()
        self._threads: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.processes > 0

    def _planner(self, planner: Planner) -> tuple[bytes, bytes]:
        found = self._pickled.get(planner)
        if found is None:
            blob = pickle.dumps(planner)
            found = (hashlib.sha256(blob).digest(), blob)
            self._pickled[planner] = found
        return found

    async def sanitize(
        self,
        body: bytes,
        planner: Planner,
        api: str,
        *,
        given: RequestFacts | None = None,
        deadline: float | None = None,
    ) -> Sanitized:
        """``sanitize_body`` in a worker process, its changes capped (``MAX_CHANGES``)."""
        result: Sanitized = await self.call(_sanitize, body, planner, api, given, deadline=deadline)
        return result

    async def call(
        self,
        function: Any,
        body: bytes,
        planner: Planner,
        *args: Any,
        deadline: float | None = None,
    ) -> Any:
        """``function(body, planner, *args)`` in a worker process (a module-level function),
        ended in the worker after ``deadline`` seconds, or as soon as the caller is cancelled."""
        key, blob = self._planner(planner)
        big = len(body) > self.big_bytes
        return await self._job((function, key, blob, body, args, deadline), big)

    async def run(self, function: Any, *args: Any, deadline: float | None = None) -> Any:
        """``function(*args)`` in a worker process, in the big lane: work no request waits on
        (the page's diff view) holds at most ``big_share`` workers, and a waiting repair goes
        first. Ended as ``call`` ends its jobs."""
        return await self._job((function, None, None, None, args, deadline), big=True)

    async def _job(self, job: tuple[Any, ...], big: bool) -> Any:
        worker = await self._acquire(big)
        loop = asyncio.get_running_loop()
        assert self._threads is not None
        exchange = loop.run_in_executor(self._threads, _exchange, worker.conn, job)
        try:
            ok, value = await asyncio.shield(exchange)
        except asyncio.CancelledError:
            # The caller's deadline: interrupt the job now; the worker comes back when it
            # answers, or is replaced if it does not within the grace.
            self._spawn_task(self._interrupt(worker, exchange))
            raise
        except (EOFError, OSError) as exc:
            self._replace(worker, "died")
            raise WorkerDied(type(exc).__name__) from None
        except Exception:
            # The job or its answer could not be (un)pickled: the pipe may hold half of it, so
            # the worker is not used again.
            self._replace(worker, "failed")
            raise
        self._release(worker)
        if not ok:
            if value == "JobInterrupted":
                self._count_interrupted()
                raise TimeoutError("offloaded job past its deadline")
            raise RuntimeError(value)  # the function raised in the worker
        return value

    # --- workers ------------------------------------------------------------------------------

    async def _acquire(self, big: bool) -> _Worker:
        worker = self._take(big)
        if worker is not None:
            return worker
        waiter: asyncio.Future[_Worker] = asyncio.get_running_loop().create_future()
        lane = self._big if big else self._small
        lane.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result())  # handed a worker just as it gave up
            else:
                with contextlib.suppress(ValueError):
                    lane.remove(waiter)
            raise

    def _take(self, big: bool) -> _Worker | None:
        """A worker for a job now (an idle one, or a new one while the pool has room), or
        ``None``: the job waits."""
        if big and self._big_running >= self.big_share:
            return None
        if self._idle:
            worker = self._idle.pop()
        elif len(self._workers) < self.processes:
            worker = self._start_worker()
        else:
            return None
        worker.big = big
        if big:
            self._big_running += 1
        return worker

    def _release(self, worker: _Worker) -> None:
        """The worker's job is over: it goes back to the pool, then to who waits (small first)."""
        self._unmark(worker)
        if worker in self._workers:
            self._idle.append(worker)
        self._hand_out()

    def _unmark(self, worker: _Worker) -> None:
        if worker.big:
            worker.big = False
            self._big_running -= 1

    def _hand_out(self) -> None:
        for lane, big in ((self._small, False), (self._big, True)):
            while lane:
                if lane[0].done():  # cancelled while waiting
                    lane.popleft()
                    continue
                worker = self._take(big)
                if worker is None:
                    break
                lane.popleft().set_result(worker)

    def _start_worker(self) -> _Worker:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.processes, thread_name_prefix="offload")
        # spawn: a fork of a process running an event loop and threads is not safe.
        context = get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve_jobs, args=(theirs, os.getpid()), name="chatmend-offload", daemon=True
        )
        process.start()
        theirs.close()  # the worker's end lives in the worker only: its death is our EOF
        worker = _Worker(process, ours)
        self._workers.add(worker)
        return worker

    def _replace(self, worker: _Worker, reason: str) -> None:
        """Drop a dead or stuck worker (killed if need be); the next job starts a new one."""
        self._unmark(worker)
        self._workers.discard(worker)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        with contextlib.suppress(Exception):
            worker.process.kill()
        with contextlib.suppress(Exception):
            worker.conn.close()
        self._spawn_task(self._reap(worker))
        if self.metrics is not None:
            self.metrics.offload_replaced.labels(reason).inc()
        log.warning("offload_worker_replaced", reason=reason, pid=worker.process.pid)
        self._hand_out()

    async def _interrupt(self, worker: _Worker, exchange: asyncio.Future[Any]) -> None:
        pid = worker.process.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        try:
            async with asyncio.timeout(KILL_GRACE):
                ok, value = await exchange
        except TimeoutError:
            self._replace(worker, "stuck")
        except (EOFError, OSError):
            self._replace(worker, "died")
        except Exception:
            self._replace(worker, "failed")
        else:
            if not ok and value == "JobInterrupted":
                self._count_interrupted()
            self._release(worker)

    async def _reap(self, worker: _Worker) -> None:
        """Wait for a killed worker's exit off the loop (no zombie left)."""
        await asyncio.to_thread(worker.process.join, 5)

    def _count_interrupted(self) -> None:
        if self.metrics is not None:
            self.metrics.offload_interrupted.inc()

    def _spawn_task(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def start(self) -> None:
        """Start one worker now (``chatmend serve``), not on the first big body: its request
        would wait for a process to import chatmend."""
        if self.enabled and not self._workers:
            self._idle.append(self._start_worker())

    def close(self) -> None:
        for worker in list(self._workers):
            with contextlib.suppress(Exception):
                worker.conn.close()  # the worker reads end-of-file and exits
            with contextlib.suppress(Exception):
                worker.process.kill()
        self._workers.clear()
        self._idle.clear()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None


def _exchange(conn: Connection, job: tuple[Any, ...]) -> tuple[bool, Any]:
    """Send a job and wait for its answer (in a thread of the pool: the loop never blocks on
    the pipe, nor on pickling the body or unpickling the answer)."""
    conn.send_bytes(pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
    answer: tuple[bool, Any] = pickle.loads(conn.recv_bytes())
    return answer


# --- in the worker process ----------------------------------------------------------------------


class _Job:
    #: A job is running: a SIGUSR1 or SIGALRM ends it (one arriving between jobs is ignored).
    running = False


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if _Job.running:
        raise JobInterrupted


def _serve_jobs(conn: Connection, parent: int) -> None:
    """A worker's life: one job at a time until the server process closes its end (or dies)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    signal.signal(signal.SIGUSR1, _interrupt)
    signal.signal(signal.SIGALRM, _interrupt)
    while True:
        try:
            job = conn.recv_bytes()
        except (EOFError, OSError):
            return
        answer: tuple[bool, Any]
        try:
            function, key, blob, body, args, deadline = pickle.loads(job)
            del job
            _Job.running = True
            if deadline:
                signal.setitimer(signal.ITIMER_REAL, deadline)
            try:
                if key is None:  # ``Offloader.run``: no body, no planner
                    answer = (True, function(*args))
                else:
                    answer = (True, function(body, _unpickled(key, blob), *args))
            finally:
                _Job.running = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except JobInterrupted:
            answer = (False, "JobInterrupted")
        except Exception as exc:
            answer = (False, type(exc).__name__)
        try:
            conn.send_bytes(pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))
        except (OSError, ValueError):
            return


def _unpickled(key: bytes, blob: bytes) -> Planner:
    planner = _PLANNERS.get(key)
    if planner is None:
        if len(_PLANNERS) >= _MAX_PLANNERS:
            _PLANNERS.clear()  # old config generations
        planner = _PLANNERS[key] = pickle.loads(blob)
    return planner


def _sanitize(body: bytes, planner: Planner, api: str, given: RequestFacts | None) -> Sanitized:
    return capped(sanitize_body(body, planner, api, given=given), MAX_CHANGES)
