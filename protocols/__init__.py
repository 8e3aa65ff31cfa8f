"""Benchmark protocols, one package each (protocols/<name>/), behind one registry.

The apps use ``protocols.registry.get(name)`` and the interface of ``protocols.base.Protocol``;
the setting ``STATELAB_PROTOCOLS`` lists the packages. Plain Python, no Django models.
"""

from .base import LETTERS, Protocol
from .registry import UnknownProtocol, get, names

__all__ = ["LETTERS", "Protocol", "UnknownProtocol", "get", "names"]
