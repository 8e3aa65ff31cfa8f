"""The baseline bench/bench_freeze.py measures against: the item-by-item freeze as it was before
the set-based one, and the resolvers' option orders drawn as they were before they were made
faster (the same orders, more work). Imported by bench_freeze.py; not part of the application."""

from __future__ import annotations

import sys
import time


def old_release_freeze(*, project, version: str, split: str = "test", user=None):
    """The item-by-item freeze, kept only to be measured against (same checks, same lines, same
    checksum): the reference the tests compare the set-based freeze with
    (tests/annotation/freeze_reference.py), imported once Django is set up."""
    from tests.annotation.freeze_reference import reference_freeze

    return reference_freeze(project=project, version=version, split=split, user=user)


def use_old_resolvers() -> None:
    """The option orders drawn as before the resolvers were made faster (same orders, more work):
    the standard library's shuffle, and ChangeIt's labels of the other objects gathered and sorted
    again for every item (tests/annotation/freeze_reference.py, the tests' reference too)."""
    import protocols.base as base
    import protocols.changeit as changeit
    from tests.annotation.freeze_reference import reference_candidates

    def old_shuffle(x, rng) -> None:
        rng.shuffle(x)

    base.shuffle = old_shuffle  # what base.shuffled (STATUS) calls
    changeit.candidates = reference_candidates


def resolver_bench(objects: int, n: int = 20_000, rounds: int = 2) -> None:
    """ChangeIt's ``resolve_queries`` alone, as before and as now, alternated in this process (CPU
    seconds): N items over a vocabulary of `objects` objects with three states each (the bench's
    items have four objects; a release of the authors' data has tens)."""
    import protocols.base as base
    import protocols.changeit as changeit

    now = (base.shuffle, changeit.candidates)
    vocab = {f"object {o}": [f"state {o}.{k}" for k in range(3)] for o in range(objects)}
    names = list(vocab)
    items = []
    for i in range(n):
        obj = names[i % objects]
        state = vocab[obj][i % 3]
        items.append(
            (f"c{i:07d}", {"object": obj, "state": state, "distractors": [s for s in vocab[obj] if s != state]})
        )
    for k in range(rounds):
        seconds, out = {}, {}
        for path in ("old", "new"):
            if path == "old":
                use_old_resolvers()
            else:
                base.shuffle, changeit.candidates = now
            start = time.process_time()
            out[path] = [changeit.protocol.resolve_queries(i, p, seed=7, vocabulary=vocab) for i, p in items]
            seconds[path] = time.process_time() - start
        print(
            f"  {objects * 3} labels, {n:,} items, round {k + 1}: old {seconds['old']:.2f} s, "
            f"new {seconds['new']:.2f} s CPU, old/new **{seconds['old'] / seconds['new']:.2f}×**, "
            f"same orders {out['old'] == out['new']}",
            flush=True,
        )
        if out["old"] != out["new"]:
            sys.exit("the resolvers differ")
