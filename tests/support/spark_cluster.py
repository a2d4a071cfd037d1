"""A Spark standalone cluster on loopback from pyspark's own classes: one master, one worker.

The wheel has no ``sbin/`` scripts, so each daemon runs through ``bin/spark-class`` in its
own process group (a new session) and is stopped by its pid, also when the test fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lakehouse_index.spark import JARS_ENV
from tests.support.paths import code_env
from tests.support.ports import free_port, wait_for_port


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def cluster_env(**extra: str) -> dict[str, str]:
    """The environment of the daemons and of a driver process: loopback, this interpreter, this checkout."""
    env = code_env(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, **extra)
    env.pop(JARS_ENV, None)  # the test run's local jars are not the cluster's business
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the daemon's process group, SIGKILL it if it lingers; reap it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def standalone_cluster(work: Path) -> Iterator[str]:
    """Start a master and a worker (1 core, 1 GB) on 127.0.0.1; yield the master URL.

    Daemon logs go to ``work/master.log`` and ``work/worker.log``; the worker's
    directory is ``work/worker``. The daemons see this checkout first on ``PYTHONPATH``,
    and so do the executors' Python workers they start.
    """
    env = cluster_env()
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(work / "master.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        str(_spark_class()),
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        str(free_port()),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        wait_for_port(port, procs[0])
        with open(work / "worker.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        str(_spark_class()),
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(work / "worker"),
                    ],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        yield url
    finally:
        for p in reversed(procs):
            _stop(p)
