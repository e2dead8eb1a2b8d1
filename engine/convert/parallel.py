"""Writing the ncnn and the pnnx model at the same time, on two threads.

Most of the time writing a model with large weights goes where Python lets go of the
interpreter lock: converting weights to fp16 and checking their range (numpy), the CRC-32 of
the ``.pnnx.bin`` members (zlib), the writes themselves (the kernel's copy into the page
cache). The two models share the weights but no file, so on a machine with two cores the one
side's bytes move while the other side's bytes move (ConvNeXt-L: the whole command in 0.76 s
instead of 1.18 s of wall-clock time, for about the same CPU time).
With few weights, or many operators sharing them (a 10k-operator detection graph holds 9 KB
per operator), the writing is mostly per-operator Python, which two threads only take turns at,
paying the lock's handoffs (5 % more CPU time there, and no sooner done): such a graph stays on
one thread (:func:`worth_parallel`).

:func:`run_both` keeps the guarantees of one thread: both sides write inside the caller's
:func:`~engine.writers.atomic_transaction` (the thread runs in a copy of the caller's context,
so its temporary files join the same transaction, and :func:`~engine.writers.durable_writes`
holds there too); the first failure, or a cancel from ``progress``, stops the other side at its
next operator, and that failure is what the caller sees.
"""
from __future__ import annotations

import contextvars
import math
import threading
from typing import TYPE_CHECKING, Callable

from ..ir import Graph

if TYPE_CHECKING:  # the writers' own callback type (not imported at run time: start-up)
    from ..writers.ncnn_writer import Progress

#: weight bytes from which the two models are written in parallel ...
PARALLEL_MIN_BYTES = 32 << 20
#: ... when the operators hold this many on average (each operator costs both writers about as
#: much Python as 32 KB of weights cost in bytes: MaxViT-T, 118 KB an operator, writes in 15 %
#: less time on two threads; a detection graph, 9 KB an operator, in 3 % more)
PARALLEL_MIN_BYTES_PER_OP = 64 << 10

class _Stopped(Exception):
    """The other side failed or was cancelled: this side stops too (never seen by the caller)."""


def worth_parallel(graph: Graph) -> bool:
    """Whether ``graph``'s weights are heavy enough for :func:`run_both` to pay (see above):
    counted at 4 bytes a value from the shapes, nothing read."""
    n = 4 * sum(math.prod(a.shape) for op in graph.ops for a in op.attrs.values())
    return n >= PARALLEL_MIN_BYTES and n >= PARALLEL_MIN_BYTES_PER_OP * max(len(graph.ops), 1)


def run_both(first: Callable[[Progress | None], None], second: Callable[[Progress | None], None],
             progress: Progress | None) -> None:
    """Run ``first(p)`` on this thread and ``second(p)`` on another, ``p`` being ``progress``
    (may be None) that also stops a side once the other has failed; return when both are done,
    raise the first real failure (a cancel included) otherwise."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(done: int, total: int) -> None:
        if stop.is_set():
            raise _Stopped()
        if progress is not None:
            progress(done, total)

    def side(fn) -> None:
        try:
            fn(guarded)
        except BaseException as e:  # noqa: BLE001 — handed to the caller's thread below
            errors.append(e)
            stop.set()

    ctx = contextvars.copy_context()
    worker = threading.Thread(target=ctx.run, args=(side, second), name="pt2ncnn-write-pnnx", daemon=True)
    worker.start()
    try:
        side(first)
    finally:
        _join(worker, stop, errors)
    real = [e for e in errors if not isinstance(e, _Stopped)]
    if real:
        raise real[0]


def _join(worker: threading.Thread, stop: threading.Event, errors: list[BaseException]) -> None:
    """Wait for ``worker`` even through a Ctrl-C (which stops it first): its temporary files
    must be closed before the transaction removes them."""
    while True:
        try:
            worker.join()
            return
        except BaseException as e:  # noqa: BLE001 — KeyboardInterrupt while waiting
            errors.insert(0, e)
            stop.set()
