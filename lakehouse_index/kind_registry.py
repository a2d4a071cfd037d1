"""The one registry of index kinds: the entry-point group ``lakehouse_index.kinds``.

A distribution installs an index kind by registering its plug-in class (a subclass of
:class:`~lakehouse_index.kinds.base.IndexKind`) under the group, named as the kind is in its
specs' JSON (``"kind"``). Everything that needs a kind asks here: parsing a spec
(:func:`spec_from_json`, which the index log calls) takes the spec class from the kind's
plug-in (its ``spec_type``), and ``kinds.base.kind_of`` returns the plug-in itself.

Plug-ins are loaded lazily, each the first time its kind is asked for (a broken third-party
kind fails only the indexes of that kind). The module sits beside the specs, below the log
and the kinds: it loads plug-ins through their entry points and knows them only as
:class:`KindPlugin`, so it imports nothing of theirs.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.spec import IndexSpec

#: Entry-point group of index kinds.
ENTRY_POINT_GROUP = "lakehouse_index.kinds"


class KindPlugin(Protocol):
    """What the registry knows of a kind's plug-in (an ``IndexKind`` instance)."""

    @property
    def name(self) -> str:
        """The kind's name: its entry-point name and its specs' ``"kind"``."""

    @property
    def spec_type(self) -> type[IndexSpec]:
        """The spec class users declare indexes of this kind with."""


@cache
def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def installed_kinds() -> list[str]:
    """The names of the installed index kinds, sorted (their plug-ins are not loaded)."""
    return sorted(_entry_points())


@cache
def plugin(kind: str) -> KindPlugin:
    """The plug-in of ``kind``, loaded on first use; ``InvalidIndexSpecError`` if no installed
    kind has that name, or its entry point is not a kind class of that name whose
    ``spec_type`` is an :class:`IndexSpec` of that kind."""
    ep = _entry_points().get(kind)
    if ep is None:
        raise InvalidIndexSpecError(f"no index kind {kind!r} is installed (installed: {installed_kinds()})")
    cls = ep.load()
    spec_type = getattr(cls, "spec_type", None)
    if not (
        isinstance(cls, type)
        and getattr(cls, "name", None) == kind
        and isinstance(spec_type, type)
        and issubclass(spec_type, IndexSpec)
        and getattr(spec_type, "kind", None) == kind
    ):
        raise InvalidIndexSpecError(
            f"entry point {ep.value!r} in {ENTRY_POINT_GROUP} is not an index kind named {kind!r} "
            f"with a spec_type of kind {kind!r}"
        )
    found: KindPlugin = cls()
    return found


def spec_from_json(d: dict[str, Any]) -> IndexSpec:
    """Inverse of :func:`~lakehouse_index.spec.spec_to_json`: the spec class of ``d["kind"]``
    is the ``spec_type`` of that kind's plug-in."""
    kind = d.get("kind")
    if not isinstance(kind, str):
        raise InvalidIndexSpecError(f"an index spec's \"kind\" must be a kind's name, got {kind!r}")
    return plugin(kind).spec_type.from_json(d)
