"""The ``lakehouse-index`` command line: the Table API, one sub-command per operation.

Exit status 0 on success, 1 for an operation error (one line on standard error; the
traceback with ``--debug``), 2 for a usage error. Progress goes to standard error
(``--quiet`` silences it), results to standard output (``--json``: machine-readable).

:mod:`~lakehouse_index.cli.app` is the command group and the entry point;
:mod:`~lakehouse_index.cli.options` declares the parameters commands share; the commands live
by concept in :mod:`~lakehouse_index.cli.indexes`, :mod:`~lakehouse_index.cli.query`,
:mod:`~lakehouse_index.cli.sync`, :mod:`~lakehouse_index.cli.erasure` and
:mod:`~lakehouse_index.cli.demo`.
"""

from lakehouse_index.cli.app import app, main

__all__ = ["app", "main"]
