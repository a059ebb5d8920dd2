"""Dynamic batching: concurrent requests joined into one search, and split back.

Requests wait in one bounded queue (counted in sentences). A batch starts once
``max_batch`` sentences with the same search options are waiting, or ``max_wait``
seconds after its oldest request arrived, whichever comes first; it takes the waiting
requests with those options in arrival order (a request larger than ``max_batch`` goes
alone), and the model translates it on one worker thread, so the event loop stays free
to accept and refuse requests meanwhile. A request that would take the queue past
``max_queue`` sentences is refused at once (HTTP 503), never left waiting behind it; one
of more than ``max_queue`` sentences can never be taken (HTTP 413).

A request not answered within ``timeout`` seconds gets HTTP 504; if it is still waiting
it is dropped from the queue, and if its batch is being translated the answer is thrown
away when it comes. A batch that fails is translated again one request at a time, so
that only the request that fails gets the error. :meth:`Batcher.stop_by` bounds the
stop: what is not answered by its deadline gets HTTP 503, and the model's thread is
left to the process's end.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from keras_memnmt.serving.translators import RequestError


@dataclasses.dataclass
class _Waiting:
    key: Hashable
    sentences: list[str]
    future: asyncio.Future
    arrived: float


class Batcher:
    """Runs ``work(key, sentences, cancelled) -> results`` (one result per sentence) over
    batches of requests with the same ``key``; ``cancelled()`` says, on the model's thread,
    whether every request of the batch has been answered already (timed out, refused),
    so that ``work`` may stop early. Start it inside the event loop (``start``), stop it
    with ``close`` (what is queued is still translated)."""

    def __init__(
        self,
        work: Callable[[tuple, list[str], Callable[[], bool]], list],
        max_batch: int = 32,
        max_wait: float = 0.005,
        max_queue: int = 1024,
        timeout: float = 60.0,
    ):
        self.work, self.max_batch, self.max_wait, self.max_queue = work, max_batch, max_wait, max_queue
        self.timeout = timeout
        self.waiting: collections.deque[_Waiting] = collections.deque()
        self.queued = 0  # sentences waiting
        self.closing = False
        self.batches = 0  # batches translated (and sentences in them), for the status page
        self.sentences = 0
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="memnmt-model")  # the model's one thread
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._running: list[_Waiting] = []  # the batch on the model's thread
        self._deadline: float | None = None  # stop_by's
        self.busy = False  # the model's thread is translating

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._event_loop = asyncio.get_running_loop()
        self._task = self._event_loop.create_task(self._loop())

    def stop_by(self, deadline: float) -> None:
        """From any thread (a signal handler's): refuse new requests, and at ``deadline``
        (``time.monotonic()``) answer every request still waiting or being translated with
        HTTP 503."""
        if self._event_loop is None:
            return

        def begin():
            self.closing = True
            self._deadline = deadline if self._deadline is None else min(self._deadline, deadline)
            self._wake.set()
            self._event_loop.call_later(max(0.0, deadline - time.monotonic()), self._refuse_the_rest)

        self._event_loop.call_soon_threadsafe(begin)

    def _refuse_the_rest(self) -> None:
        error = RequestError("the server stopped before this request was translated", 503)
        for waiting in [*self._running, *self.waiting]:
            if not waiting.future.done():
                waiting.future.set_exception(error)
        self.queued = 0
        self.waiting.clear()

    async def close(self) -> None:
        """Refuses new requests and translates those still queued (until :meth:`stop_by`'s
        deadline, if one was set), then stops the worker; a translation still running at the
        deadline is abandoned (its thread ends with the process)."""
        self.closing = True
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            left = None if self._deadline is None else max(0.0, self._deadline - time.monotonic())
            try:
                await asyncio.wait_for(asyncio.shield(self._task), left)
            except asyncio.TimeoutError:
                self._refuse_the_rest()
                self._task.cancel()
        self.executor.shutdown(wait=not self.busy, cancel_futures=True)

    async def submit(self, key: Hashable, sentences: list[str]) -> list:
        if self.closing:
            raise RequestError("the server is shutting down; no new requests are taken", 503)
        if len(sentences) > self.max_queue:
            raise RequestError(
                f"this request has {len(sentences)} sentences, more than the queue holds "
                f"({self.max_queue}, --max-queue): send at most {self.max_queue} at a time",
                413,
            )
        if self.queued + len(sentences) > self.max_queue:
            raise RequestError(
                f"busy: {self.queued} sentences are waiting and this request has {len(sentences)}; "
                f"the queue holds {self.max_queue} (--max-queue); try again shortly",
                503,
            )
        future = asyncio.get_running_loop().create_future()
        waiting = _Waiting(key, sentences, future, time.monotonic())
        self.waiting.append(waiting)
        self.queued += len(sentences)
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:  # timed out, or the client went away
            if waiting in self.waiting:  # not started: it leaves the queue
                self.waiting.remove(waiting)
                self.queued -= len(sentences)
            future.cancel()
            if isinstance(e, asyncio.CancelledError):
                raise
            raise RequestError(
                f"not translated within {self.timeout:g} s (--timeout); the server goes on", 504
            ) from None

    async def run_alone(self, function: Callable, *args):
        """``function(*args)`` on the model's thread (between batches), awaited."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    def _ready(self, key: Hashable) -> int:
        return sum(len(w.sentences) for w in self.waiting if w.key == key)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.waiting:
                if self.closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            first = self.waiting[0]
            # Gather: until the batch is full, the oldest request has waited max_wait, or closing.
            while self._ready(first.key) < self.max_batch and not self.closing:
                left = first.arrived + self.max_wait - time.monotonic()
                if left <= 0:
                    break
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), left)
                except asyncio.TimeoutError:
                    break
            batch, size = [], 0
            for waiting in list(self.waiting):
                if waiting.key != first.key:
                    continue
                if batch and size + len(waiting.sentences) > self.max_batch:
                    break
                batch.append(waiting)
                size += len(waiting.sentences)
                self.waiting.remove(waiting)
            self.queued -= size
            batch = [w for w in batch if not w.future.done()]  # answered meanwhile (timed out, refused)
            if not batch:
                continue
            try:
                await self._translate(loop, first.key, batch)
            except Exception as error:
                if len(batch) == 1:
                    _fail(batch[0], error)
                    continue
                for waiting in batch:  # each request alone: only one that fails itself gets an error
                    if not waiting.future.done():
                        try:
                            await self._translate(loop, first.key, [waiting])
                        except Exception as alone:
                            _fail(waiting, alone)
            finally:
                self._running = []

    def _work(self, key: Hashable, sentences: list[str]) -> list:
        """``work`` on the model's thread, which ``busy`` says while it runs."""
        self.busy = True
        running = self._running
        try:
            return self.work(key, sentences, lambda: all(w.future.done() for w in running))
        finally:
            self.busy = False

    async def _translate(self, loop, key: Hashable, batch: list[_Waiting]) -> None:
        """``work`` over the sentences of ``batch`` on the model's thread; each request's
        future gets its share of the results (a future already answered is left as it is)."""
        sentences = [s for w in batch for s in w.sentences]
        self._running = batch
        results = await loop.run_in_executor(self.executor, self._work, key, sentences)
        self.batches += 1
        self.sentences += len(sentences)
        start = 0
        for waiting in batch:
            if not waiting.future.done():  # a client that went away, or timed out, leaves it done
                waiting.future.set_result(results[start : start + len(waiting.sentences)])
            start += len(waiting.sentences)


def _fail(waiting: _Waiting, error: Exception) -> None:
    if not waiting.future.done():
        waiting.future.set_exception(error)
