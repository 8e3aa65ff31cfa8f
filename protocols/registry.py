"""The one registry of protocols: name -> Protocol object (protocols/base.py).

Built from the setting ``STATELAB_PROTOCOLS``, a list of dotted paths of protocol packages
(each exposes ``protocol``, an instance of a Protocol subclass). Adding a benchmark is one new
package and one line in that list. Outside Django (a notebook, a pure-Python test) the built-in
list ``BUILT_IN`` is used. The registry follows the setting as it is now (a test that overrides
it sees its own protocols), and keeps one object per path.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from .base import Protocol

BUILT_IN = (
    "protocols.status",
    "protocols.changeit",
    "protocols.visualtrans",
    "protocols.m3verse",
    "protocols.oscbench",
    "protocols.arena",
)

_loaded: dict[str, Protocol] = {}
_tables: dict[tuple[str, ...], dict[str, Protocol]] = {}


class UnknownProtocol(ValueError):
    pass


_settings: Any = None  # django.conf.settings, once Django is importable and configured
_last: tuple[object, dict[str, Protocol]] | None = None  # (the setting's value, its table)


def _source() -> object:
    """The setting's value as it is now (BUILT_IN outside Django). Django is imported lazily and
    only once, so pure-Python users of protocols/ never load it."""
    global _settings
    if _settings is None:
        try:
            from django.conf import settings
        except ImportError:  # plain Python without Django installed
            return BUILT_IN
        if not settings.configured:
            return BUILT_IN
        _settings = settings
    return getattr(_settings, "STATELAB_PROTOCOLS", BUILT_IN)


def _load(path: str) -> Protocol:
    if path not in _loaded:
        found = getattr(importlib.import_module(path), "protocol", None)
        if not isinstance(found, Protocol):
            raise ImportError(f"{path} defines no `protocol` (an instance of protocols.base.Protocol)")
        _loaded[path] = found
    return _loaded[path]


def _table() -> dict[str, Protocol]:
    # The hot paths (an import's every line, every answer parsed) ask the registry once per call:
    # while the setting is the same object, its table is returned as is. A settings override
    # (override_settings in tests) hands out another object, whose table is built or found.
    global _last
    source = _source()
    last = _last
    if last is not None and last[0] is source:
        return last[1]
    paths = tuple(source)
    table = _tables.get(paths)
    if table is None:
        table = {}
        for path in paths:
            found = _load(path)
            if found.name in table:
                raise ImportError(f"two protocols named {found.name!r} in STATELAB_PROTOCOLS")
            table[found.name] = found
        _tables[paths] = table
    _last = (source, table)
    return table


def get(name: str) -> Protocol:
    """The protocol called ``name``; UnknownProtocol (a ValueError) when none is registered."""
    try:
        return _table()[name]
    except KeyError:
        raise UnknownProtocol(f"unknown protocol {name!r}") from None


def names() -> tuple[str, ...]:
    """Registered protocol names, in the setting's order."""
    return tuple(_table())


def protocols() -> Iterator[Protocol]:
    return iter(tuple(_table().values()))


def choices() -> list[tuple[str, str]]:
    """(name, label) of every registered protocol, for forms and the projects' field."""
    return [(p.name, p.label) for p in protocols()]


def with_workflow(workflow: str) -> tuple[str, ...]:
    """Names of the protocols annotated in one workflow's form (e.g. every QA protocol)."""
    return tuple(p.name for p in protocols() if p.workflow == workflow)


class Attribute(Mapping):
    """A read-only mapping protocol name -> one attribute of it, over the registry as it is now
    (e.g. ``Attribute("media_fields")["status"]``); an unknown name is a KeyError."""

    def __init__(self, attribute: str):
        self.attribute = attribute

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(get(name), self.attribute)
        except UnknownProtocol:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())
