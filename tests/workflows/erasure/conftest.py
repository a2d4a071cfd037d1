"""Fixtures of the erase tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The Spark session with the Iceberg catalog ``erase`` on one warehouse for the whole run.

    Spark keeps a catalog's first warehouse for the session, so every module shares this one
    (each test uses its own table name).
    """
    from tests.support.spark_iceberg import spark_session
    from tests.workflows.erasure.test_erase_iceberg import CATALOG

    wh = tmp_path_factory.mktemp("erase_wh")
    return spark_session(wh, catalog=CATALOG), wh
