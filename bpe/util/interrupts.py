"""SIGTERM as an exception: what a command does so that `finally` blocks run when it is stopped.

By default SIGTERM ends a Python process at once: no `finally`, no `except BaseException`, so a
run is left `running` and a half-written output's temp file stays on disk. Inside
`sigterm_raises`, SIGTERM raises an exception in the main thread instead (the same path as
Ctrl-C), and cleanup happens.

What it does not do: stop worker processes (`bpe.util.pool` does, on that exception), or
anything outside the main thread (signals are delivered there only; elsewhere it is a no-op).
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def sigterm_raises(
    error: type[BaseException] = KeyboardInterrupt,
    *,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM,),
    first: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Within this block, SIGTERM (or each of `signals`) raises `error` ("received signal
    SIGTERM") in the main thread, after calling `first()` when given (a launcher passes the
    signal on to its jobs there).

    >>> import os
    >>> with sigterm_raises():
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ...     except KeyboardInterrupt as err:
    ...         print(err)
    received signal SIGTERM
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):  # noqa: ARG001
        if first is not None:
            first()
        stop = error(f"received signal {signal.Signals(signum).name}")
        stop.from_signal = signum  # type: ignore[attr-defined]  (what the hook below looks for)
        raise stop

    def unraisable(hook_args) -> None:
        # subtle: a signal that lands while os.fork runs its at-fork hooks (logging's lock) is
        # raised there and swallowed ("Exception ignored in"): deliver it again, so the block
        # stops at its next line instead of running to its end
        signum = getattr(hook_args.exc_value, "from_signal", None)
        if signum is not None:
            # from another thread, a little later: the handler then runs in this one once the
            # hook (and the fork) is left
            threading.Timer(0.05, _thread.interrupt_main, args=(signum,)).start()
            return
        previous_hook(hook_args)

    previous = {s: signal.signal(s, handler) for s in signals}
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        sys.unraisablehook = previous_hook
