"""The option orders a freeze writes come from the protocols' ``resolve_queries``; they were made
faster (protocols/base.py ``shuffle``, ChangeIt's candidate pools found once per vocabulary) and
must stay the orders they were. The reference is the code as it was before
(tests/annotation/freeze_reference.py)."""

from __future__ import annotations

import random

import pytest

from protocols import registry
from protocols.base import seeded_rng, shuffle, shuffled
from protocols.changeit import STRATEGIES
from tests.annotation.freeze_reference import reference_candidates


def _reference_changeit(item_id, payload, *, seed, vocab):
    out = {}
    for strategy in STRATEGIES:
        cands = reference_candidates(payload, strategy, vocab, random.Random(f"{seed}:{item_id}:changeit:{strategy}"))
        for condition in ("full", "crop"):
            out[f"state:{strategy}:{condition}"] = {"options": cands, "answer": cands.index(payload["state"]) + 1}
    return out


# 5000: longer than the lengths whose steps protocols.base keeps (made again on every call).
@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 100, 257, 5000])
def test_shuffle_draws_what_the_standard_library_draws(length):
    for seed in range(200 if length < 1000 else 5):
        ours, theirs = list(range(length)), list(range(length))
        a, b = random.Random(f"s{seed}:{length}"), random.Random(f"s{seed}:{length}")
        shuffle(ours, a)
        b.shuffle(theirs)
        assert ours == theirs
        assert a.random() == b.random()  # and leaves the generator where it left it
    assert shuffled(list("abcdef"), seeded_rng(3, "x", "k")) == _stdlib_shuffled(
        list("abcdef"), seeded_rng(3, "x", "k")
    )


def _stdlib_shuffled(options, rng):
    rng.shuffle(options)
    return options


def test_shuffle_of_another_generator_is_its_own():
    class Counting(random.Random):
        calls = 0

        def shuffle(self, x):
            Counting.calls += 1
            super().shuffle(x)

    shuffle([1, 2, 3], Counting(1))
    assert Counting.calls == 1


def _vocabulary(rng: random.Random, objects: int, states: int, shared: int) -> dict[str, list[str]]:
    """Objects with their own states and some labels shared between objects (a state named alike
    for two objects), as ChangeIt's ``vocabulary`` returns them."""
    common = [f"shared state {k}" for k in range(shared)]
    vocab = {}
    for o in range(objects):
        own = {f"state {o}.{k}" for k in range(rng.randint(1, states))}
        own.update(rng.sample(common, rng.randint(0, len(common))) if common else [])
        vocab[f"object {o}"] = sorted(own)
    return vocab


@pytest.mark.parametrize("objects,states,shared", [(1, 3, 0), (2, 2, 1), (4, 3, 0), (12, 6, 4), (60, 5, 10)])
def test_changeit_orders_are_those_of_before(objects, states, shared):
    protocol = registry.get("changeit")
    rng = random.Random(f"{objects}-{states}-{shared}")
    vocab = _vocabulary(rng, objects, states, shared)
    labels = sorted({s for v in vocab.values() for s in v})
    for i in range(300):
        obj = rng.choice([*vocab, "an object no item of the release names"])
        truth = rng.choice(vocab.get(obj) or labels)
        payload = {"object": obj, "state": truth}
        if rng.random() < 0.8:  # distractors: sometimes the truth among them, sometimes repeats, many
            payload["distractors"] = rng.sample(labels, min(len(labels), rng.randint(0, 14))) + [truth] * (i % 2)
        item_id = f"item-{i}"
        seed = rng.randint(0, 2**31)
        assert protocol.resolve_queries(item_id, payload, seed=seed, vocabulary=vocab) == _reference_changeit(
            item_id, payload, seed=seed, vocab=vocab
        )
        # no vocabulary: the item's own, as before
        own = {obj: [truth]}
        assert protocol.resolve_queries(item_id, payload, seed=seed) == _reference_changeit(
            item_id, payload, seed=seed, vocab=own
        )


def test_changeit_follows_a_new_vocabulary():
    """The labels of other objects are remembered per vocabulary: a second vocabulary, even one
    with the same objects, is read afresh."""
    protocol = registry.get("changeit")
    payload = {"object": "a", "state": "a1", "distractors": []}
    first = {"a": ["a1"], "b": ["b1", "b2"]}
    second = {"a": ["a1"], "b": ["b3", "b4", "b5"]}
    for vocab in (first, second, first):
        resolved = protocol.resolve_queries("i", payload, seed=5, vocabulary=vocab)
        assert resolved == _reference_changeit("i", payload, seed=5, vocab=vocab)
        assert set(resolved["state:standard:full"]["options"]) == {"a1", *vocab["b"]}


def _reference_status(item_id, payload, *, seed):
    def old_shuffled(options, rng):
        out = list(options)
        rng.shuffle(out)
        return out

    change, distractors = payload["change"], list(payload["change_distractors"][:3])
    pick = random.Random(f"{seed}:{item_id}:sci2_distractor").randrange(len(distractors))
    sci2 = old_shuffled([change, distractors[pick]], random.Random(f"{seed}:{item_id}:sci2"))
    sci4 = old_shuffled([change, *distractors], random.Random(f"{seed}:{item_id}:sci4"))
    return sci2, sci4


def test_status_orders_are_those_of_before():
    protocol = registry.get("status")
    for i in range(300):
        payload = {
            "state_a": "s a",
            "state_b": "s b",
            "image_a": "a.png",
            "image_b": "b.png",
            "change": f"change {i}",
            "change_distractors": [f"d{i}.{k}" for k in range(3)],
        }
        resolved = protocol.resolve_queries(f"st-{i}", payload, seed=i * 7919)
        sci2, sci4 = _reference_status(f"st-{i}", payload, seed=i * 7919)
        assert resolved["sci2"]["options"] == sci2
        assert resolved["sci4"]["options"] == sci4
