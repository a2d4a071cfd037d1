"""Fixtures of the reliability harnesses: the emulated object stores (started once per session)."""

from tests.support.stores import azure_store, s3_store, store  # noqa: F401 - fixtures
