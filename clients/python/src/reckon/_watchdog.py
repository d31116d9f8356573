"""One thread that fires the deadlines of a transport's requests (rather than a timer thread each)."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable


class Watchdog:
    """Calls ``fire`` of each registered deadline once it passes, unless cancelled first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, fire: Callable[[], None]) -> int:
        with self._cond:
            token = next(self._ids)
            self._live[token] = fire
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="reckon-deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # cancelled
                if not self._heap:
                    if not self._cond.wait(timeout=30) and not self._heap:
                        self._thread = None  # idle: end; the next arm starts another
                        return
                    continue
                when, token = self._heap[0]
                delay = when - time.monotonic()
                if delay > 0:
                    self._cond.wait(timeout=delay)
                    continue
                heapq.heappop(self._heap)
                fire = self._live.pop(token, None)
            if fire is not None:
                try:
                    fire()
                except Exception:  # a deadline's action must not end the watchdog
                    pass
