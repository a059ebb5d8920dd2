"""Dynamic batching: concurrent requests joined into one search, and split back.

Requests wait in one bounded queue (counted in sentences). A batch starts once
``max_batch`` sentences with the same search options are waiting, or ``max_wait``
seconds after its oldest request arrived, whichever comes first; it takes the waiting
requests with those options in arrival order (a request larger than ``max_batch`` goes
alone), and the model translates it on one worker thread, so the event loop stays free
to accept and refuse requests meanwhile. A request that would take the queue past
``max_queue`` sentences is refused at once (HTTP 503), never left waiting behind it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from keras_memnmt.serving.translators import RequestError


@dataclasses.dataclass
class _Waiting:
    key: tuple
    sentences: list[str]
    future: asyncio.Future
    arrived: float


class Batcher:
    """Runs ``work(key, sentences) -> results`` (one result per sentence) over batches of
    requests with the same ``key``. Start it inside the event loop (``start``), stop it
    with ``close`` (what is queued is still translated)."""

    def __init__(self, work: Callable[[tuple, list[str]], list], max_batch: int = 32, max_wait: float = 0.005,
                 max_queue: int = 1024):
        self.work, self.max_batch, self.max_wait, self.max_queue = work, max_batch, max_wait, max_queue
        self.waiting: collections.deque[_Waiting] = collections.deque()
        self.queued = 0  # sentences waiting
        self.closing = False
        self.batches = 0  # batches translated (and sentences in them), for the status page
        self.sentences = 0
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="memnmt-model")  # the model's one thread
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        """Refuses new requests, translates those still queued, then stops the worker."""
        self.closing = True
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await self._task
        self.executor.shutdown(wait=True)

    async def submit(self, key: tuple, sentences: list[str]) -> list:
        if self.closing:
            raise RequestError("the server is shutting down; no new requests are taken", 503)
        if self.queued + len(sentences) > self.max_queue:
            raise RequestError(f"busy: {self.queued} sentences are waiting and this request has {len(sentences)}; "
                               f"the queue holds {self.max_queue} (--max-queue); try again shortly", 503)
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(_Waiting(key, sentences, future, time.monotonic()))
        self.queued += len(sentences)
        self._wake.set()
        return await future

    async def run_alone(self, function: Callable, *args):
        """``function(*args)`` on the model's thread (between batches), awaited."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    def _ready(self, key: tuple) -> int:
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
            sentences = [s for w in batch for s in w.sentences]
            try:
                results = await loop.run_in_executor(self.executor, self.work, first.key, sentences)
            except Exception as error:  # every request of the batch gets the error; the server goes on
                for waiting in batch:
                    if not waiting.future.done():
                        waiting.future.set_exception(error)
                continue
            self.batches += 1
            self.sentences += len(sentences)
            start = 0
            for waiting in batch:
                if not waiting.future.done():  # a client that went away leaves a cancelled future
                    waiting.future.set_result(results[start:start + len(waiting.sentences)])
                start += len(waiting.sentences)
