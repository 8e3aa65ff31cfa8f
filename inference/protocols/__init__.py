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


def json_queries(name: str, *, suggest: bool = False) -> tuple[str, ...]:
    """The query keys this protocol asks under a JSON schema (PreparedQuery.query.json_schema):
    the OSCBench judge's scores and, in suggest mode, a STATUS suggestion's drafted quintuplet.

    Their replies are a tool's output, not the answer being evaluated: one that does not read is
    repaired (services/chunks.py), and one that stays unreadable is an *unreadable reply*,
    missing from the scores, listed apart from failed requests and asked again by "retry failed"
    (PROTOCOLS §5: "repaired or retried, else missing"). An option reply (a letter, a number)
    that names no option is the evaluated model's own answer: a parse failure, never re-asked."""
    get_protocol(name)
    if suggest:
        return (status.SUGGEST_KEY,) if name == "status" else ()
    return (oscbench.JUDGE_KEY,) if name == "oscbench" else ()


def prompt_version(name: str, strategy: str | None = None) -> str:
    version = get_protocol(name).PROMPT_VERSION
    if strategy == "multistage":
        from . import multistage

        version += "+" + multistage.PROMPT_VERSION
    return version
