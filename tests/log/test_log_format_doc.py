"""docs/FORMAT.md stays true: its compatibility matrix matches what run_operation does, and
the entry fields it documents are exactly the ones written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from logtest_helpers import source, spec
from test_log_lifecycle import STATES, run, setup_log

from lakehouse_index.errors import IllegalIndexStateError, IndexExistsError, IndexNotFoundError
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import IndexBusyError
from lakehouse_index.log.store import IndexLog

DOC = Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md"


def _matrix() -> dict[tuple[str, str], str]:
    text = DOC.read_text()
    block = text.split("<!-- matrix:begin")[1].split("<!-- matrix:end -->")[0]
    rows = [r.strip().strip("|").split("|") for r in block.splitlines() if r.startswith("|")]
    header = [c.strip() for c in rows[0]]
    out = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row]
        for state, verdict in zip(header[1:], cells[1:], strict=True):
            out[(cells[0], state)] = verdict
    return out


def _observed(local, op: Operation, state) -> str:
    log = IndexLog(local.storage, local.index_dir)
    setup_log(log, state)
    try:
        run(log, op, state)
    except IndexBusyError:
        return "busy"
    except IndexExistsError:
        return "exists"
    except IndexNotFoundError:
        return "missing"
    except IllegalIndexStateError:
        return "illegal"
    return "yes"


MATRIX = _matrix()


@pytest.mark.parametrize("state", STATES, ids=lambda s: "EMPTY" if s is None else s.value)
@pytest.mark.parametrize("op", list(Operation), ids=lambda o: o.value)
def test_documented_matrix_matches_behaviour(local, op, state) -> None:
    column = "EMPTY" if state is None else state.value
    assert MATRIX[(op.value, column)] == _observed(local, op, state)


def test_documented_entry_fields_are_the_written_ones() -> None:
    text = DOC.read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", text, flags=re.M))
    entry = LogEntry(id=0, spec=spec(), state=list(STATES)[1], operation=Operation.CREATE, source=source(0))
    doc = json.loads(entry.to_json())
    written = set(doc) | set(doc["source"]) | set(doc["content"]) | set(doc["spec"])
    assert written <= documented, written - documented
