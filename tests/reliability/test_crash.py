"""Crash harness: every mutating operation killed with SIGKILL at its named crash points and at
random moments, on Delta and Iceberg; recovery proved by :func:`tests.reliability.crash.run_trial`.

CI runs one named point per operation (the format and the point rotate with the operation's
place in the list) and a random kill of every third operation. ``LAKEHOUSE_INDEX_LONG=1`` runs every
named point of every operation on both formats plus three random kills per operation and
format (figures in docs/RELIABILITY.md).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict
from pathlib import Path

import pytest

from lakehouse_index.faults import CRASH_POINTS
from tests.reliability.crash import Outcome, Trial, run_trial
from tests.reliability.crash_ops import OPS

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"
FORMATS = ("delta", "iceberg")
#: Random kills per operation and format in the long variant.
RANDOM_KILLS = 3


def _named() -> list[Trial]:
    if LONG:
        return [Trial(fmt, op.name, p) for op in OPS.values() for p in op.points for fmt in FORMATS]
    return [
        Trial(FORMATS[i % 2], op.name, op.points[i % len(op.points)]) for i, op in enumerate(OPS.values())
    ]


def _random() -> list[Trial]:
    rng = random.Random(16)
    if LONG:
        pairs = [(fmt, op) for op in OPS for fmt in FORMATS for _ in range(RANDOM_KILLS)]
    else:
        pairs = [(FORMATS[(i // 3) % 2], op) for i, op in enumerate(OPS) if i % 3 == 0]
    # The delay counts from the child's "ready" (imports and table open done); the operations
    # take 0.05-1.5 s, so a draw up to 1 s lands before, inside or after the operation.
    return [Trial(fmt, op, delay_s=round(rng.uniform(0.0, 1.0), 3)) for fmt, op in pairs]


def _record(outcome: Outcome) -> None:
    """Append the outcome as a JSON line to ``$LAKEHOUSE_INDEX_RELIABILITY_LOG`` (when set)."""
    target = os.environ.get("LAKEHOUSE_INDEX_RELIABILITY_LOG")
    if target:
        with open(target, "a") as f:
            record = {**asdict(outcome), "trial": outcome.trial.label}
            f.write(json.dumps(record) + "\n")


@pytest.mark.parametrize("trial", _named(), ids=lambda t: t.label)
def test_killed_at_a_named_point(tmp_path: Path, trial: Trial) -> None:
    outcome = run_trial(tmp_path, trial)
    _record(outcome)
    assert outcome.killed


@pytest.mark.parametrize("trial", _random(), ids=lambda t: t.label)
def test_killed_at_a_random_moment(tmp_path: Path, trial: Trial) -> None:
    _record(run_trial(tmp_path, trial))


def test_every_point_is_documented_and_exercised() -> None:
    """The harness's points are the documented ones, and every documented point is exercised."""
    used = {p for op in OPS.values() for p in op.points}
    generic = {p.replace(op.name, "{op}", 1) for op in OPS.values() for p in op.points}
    generic |= {p.split(".")[0] + ".{step}" for p in used if p.startswith("purge.")}
    documented = set(CRASH_POINTS)
    assert documented <= used | generic, documented - used - generic
    doc = (Path(__file__).resolve().parents[2] / "docs" / "RELIABILITY.md").read_text()
    assert all(f"`{p}`" in doc for p in documented), [p for p in documented if f"`{p}`" not in doc]
