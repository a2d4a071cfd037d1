"""Where a read through the source spends its time: an opt-in profile of each worker-side step.

Spark runs the source's methods in several Python worker processes (see
:mod:`lakehouse_index.spark_source.datasource`), where no profiler is attached. With the
environment variable ``LAKEHOUSE_INDEX_SOURCE_PROFILE`` set to a directory (set it before the
Spark session starts: workers inherit the driver's environment), every step runs under
``cProfile`` and leaves ``<pid>-<step>-<n>.prof`` (``python -m pstats`` reads it) plus one line
``<unix time> <pid> <step> <seconds>`` in ``timings.log`` there. Unset, nothing is measured.
"""

from __future__ import annotations

import cProfile
import functools
import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PROFILE_ENV", "profiled"]

#: The environment variable naming the profile directory.
PROFILE_ENV = "LAKEHOUSE_INDEX_SOURCE_PROFILE"

_F = TypeVar("_F", bound=Callable[..., Any])
_counter = itertools.count()


def _record(directory: Path, step: str, profile: cProfile.Profile, seconds: float) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    profile.dump_stats(directory / f"{pid}-{step}-{next(_counter)}.prof")
    with open(directory / "timings.log", "a") as log:
        log.write(f"{time.time():.3f} {pid} {step} {seconds:.4f}\n")


def profiled(step: str) -> Callable[[_F], _F]:
    """Profile the decorated method when ``$LAKEHOUSE_INDEX_SOURCE_PROFILE`` is set.

    A generator method (``read``) is measured until it is exhausted.
    """

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            target = os.environ.get(PROFILE_ENV)
            if not target:
                return fn(*args, **kwargs)
            profile = cProfile.Profile()
            start = time.perf_counter()
            result = profile.runcall(fn, *args, **kwargs)
            if isinstance(result, Iterator):
                result = profile.runcall(list, result)
                _record(Path(target), step, profile, time.perf_counter() - start)
                return iter(result)
            _record(Path(target), step, profile, time.perf_counter() - start)
            return result

        return run  # type: ignore[return-value]

    return decorate
