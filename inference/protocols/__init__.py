"""Protocol modules: each turns one item into its model queries (see base.py)."""
from __future__ import annotations

from types import ModuleType

from . import changeit, m3verse, oscbench, status, visualtrans

MODULES: dict[str, ModuleType] = {
    "status": status,
    "changeit": changeit,
    "visualtrans": visualtrans,
    "m3verse": m3verse,
    "oscbench": oscbench,
}


def get_protocol(name: str) -> ModuleType:
    try:
        return MODULES[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}") from None


def prompt_version(name: str, strategy: str | None = None) -> str:
    version = get_protocol(name).PROMPT_VERSION
    if strategy == "multistage":
        from . import multistage

        version += "+" + multistage.PROMPT_VERSION
    return version
