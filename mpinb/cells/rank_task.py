"""One rank's part of a running cell, as the client follows it (``RankTask``), made from the
one request a cell sends to all its ranks (``per_rank``).
"""

from __future__ import annotations

from concurrent.futures import wait as futures_wait


class RankTask:
    """One rank's part of a running cell, answering as an ipyparallel AsyncResult of that one
    message would (``ready``, ``wait``, ``get``, ``wait_for_output``), read straight from
    ipyparallel's own future of the message; and its metadata, from which ``stdout``,
    ``stderr`` and the published ``data`` are read as they arrive. (An AsyncResult per rank
    cost 0.1 ms each to make, and its own attributes parse the metadata's dates with dateutil
    on each access: ~0.1 ms each, several times per poll.)"""

    __slots__ = ("future", "metadata")

    def __init__(self, future):
        self.future, self.metadata = future, future.output.metadata

    def ready(self) -> bool:
        return self.future.done()

    def wait(self, timeout=-1) -> bool:
        """Whether the reply is in, after waiting up to ``timeout`` seconds (negative: no limit)."""
        return self.future.wait(_limit(timeout))

    def get(self, timeout=-1):
        """The engine's return value; its error (a RemoteError, or EngineError when the engine
        died) raised; ipyparallel's TimeoutError if the reply is not in within ``timeout``."""
        from ipyparallel.error import TimeoutError as NotYet

        if not self.wait(timeout):
            raise NotYet("the rank's result is not ready")
        value = self.future.result()  # ipyparallel stores an engine's error as the value
        if isinstance(value, Exception):
            raise value
        return value

    def wait_for_output(self, timeout=-1) -> bool:
        """Whether all the output of the message is in, after waiting up to ``timeout`` seconds
        (negative: no limit). Unlike an AsyncResult's, it does not wait for the result too: ask
        once ``ready()`` (a result can arrive before the last of its output)."""
        if self.future.output.done():
            return True
        done, _ = futures_wait([self.future.output], _limit(timeout))
        return bool(done)

    @property
    def stdout(self) -> str:
        return self.metadata.get("stdout") or ""

    @property
    def stderr(self) -> str:
        return self.metadata.get("stderr") or ""

    @property
    def data(self) -> dict:
        return self.metadata.get("data") or {}


def _limit(timeout) -> float | None:
    """ipyparallel's timeout convention (negative or None: no limit) as concurrent.futures' (None)."""
    return None if timeout is None or timeout < 0 else timeout


def per_rank(sent) -> list[RankTask]:
    """One RankTask per message of ``sent`` (an AsyncResult of one request to several engines, one
    message each, in target order), made from the message futures it holds. Looking them up by
    msg_id instead (``client.get_result``) races with ipyparallel purging its caches as soon as
    a reply is in: a fast rank's reply made that a KeyError."""
    futures = sent._children  # ipyparallel's own per-message futures (AsyncResult keeps them)
    if len(futures) != len(sent.msg_ids):
        raise RuntimeError("mpinb: this ipyparallel's AsyncResult does not hold one future per message")
    return [RankTask(future) for future in futures]
