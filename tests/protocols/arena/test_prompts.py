"""The arena judge's prompts (protocols/arena/prompts.py): two asks per pair, sides swapped, and an
inference job on an arena project end to end against the local OpenAI stand-in."""

from collections import Counter

import pytest

from annotation.models import ItemStatus, Role
from inference import services
from inference.models import JobStatus, Prediction, PredictionStatus
from protocols import registry
from protocols.arena import judging, prompts
from protocols.kit.answers import parse_answer
from protocols.kit.prompting import ItemInput, MediaError
from tests.helpers.clients import session_client
from tests.inference import factories
from tests.inference.openai_standin import StandIn

from .helpers import clips, make_pair, pictures


class FakeMedia:
    """Data URLs naming the file they stand for, so a test can see which output went first."""

    def __init__(self, broken: str | None = None):
        self.broken = broken

    def image(self, path, *, bbox=None):
        if path == self.broken:
            raise MediaError(f"media file {path} is missing from the media storage")
        return f"data:image/png;base64,{path}"

    def frames(self, path, n, *, content_hash=None, known=None):
        if path == self.broken:
            raise MediaError(f"media file {path} is missing from the media storage")
        return [f"data:image/jpeg;base64,{path}-{i}" for i in range(n)], list(range(0, 10 * n, 10))


def _item(kind="video", **payload):
    base = {"prompt": "A hand slices a tomato", "model_a": "m1", "model_b": "m2"}
    base.update({f"{kind}_a": f"{kind}-a", f"{kind}_b": f"{kind}-b"} | payload)
    fields = ("video_a", "video_b", "image_a", "image_b")
    return ItemInput(
        item_pk=5,
        external_id="p-1",
        payload=base,
        media_paths={f: base.get(f) for f in fields},
        media_hashes={},
        resolved=registry.get("arena").resolve_queries("p-1", base, seed=1),
    )


def _urls(query):
    return [p["image_url"]["url"] for p in query.messages[0]["content"] if p["type"] == "image_url"]


def test_each_pair_is_asked_twice_with_the_sides_swapped():
    ab, ba = prompts.build(_item(), media=FakeMedia(), params={"frames": 3})
    assert (ab.key, ba.key) == ("judge_ab", "judge_ba")
    assert ab.query.key == "5|judge_ab" and ba.query.key == "5|judge_ba"
    assert [u.rsplit(",", 1)[1] for u in _urls(ab.query)] == [f"video-{s}-{i}" for s in "ab" for i in range(3)]
    assert [u.rsplit(",", 1)[1] for u in _urls(ba.query)] == [f"video-{s}-{i}" for s in "ba" for i in range(3)]
    # The same words both ways: only the order of the outputs tells the asks apart.
    assert ab.prompt == ba.prompt
    assert '"A hand slices a tomato"' in ab.prompt and "m1" not in ab.prompt and "m2" not in ab.prompt
    assert ab.query.choices == ["A", "B", "C", "D"] and ab.options == list(prompts.VERDICT_OPTIONS)
    assert ab.frame_indices == {"video_a": [0, 10, 20], "video_b": [0, 10, 20]}


def test_images_are_shown_whole():
    ab, ba = prompts.build(_item("image"), media=FakeMedia(), params={})
    assert [u.rsplit(",", 1)[1] for u in _urls(ab.query)] == ["image-a", "image-b"]
    assert [u.rsplit(",", 1)[1] for u in _urls(ba.query)] == ["image-b", "image-a"]
    assert ab.frame_indices is None and "two images" in ab.prompt


def test_an_output_that_cannot_be_prepared_fails_both_asks_with_the_reason():
    found = prompts.build(_item(), media=FakeMedia(broken="video-b"), params={})
    assert [q.key for q in found] == ["judge_ab", "judge_ba"]
    assert all(q.query is None and "video-b is missing" in q.error for q in found)
    half = _item()
    del half.payload["video_b"]
    found = prompts.build(half, media=FakeMedia(), params={})
    assert all(q.query is None and "no whole pair" in q.error for q in found)


def test_frames_out_of_range_are_refused():
    with pytest.raises(ValueError, match="frames must be between 1 and 200, got 500"):
        prompts.build(_item(), media=FakeMedia(), params={"frames": 500})


def test_replies_read_back_into_the_items_terms():
    options = list(prompts.VERDICT_OPTIONS)
    letters = {raw: parse_answer("arena", "judge_ab", raw, options) for raw in ("B", "Answer: (C)", "Both are bad")}
    assert letters == {"B": "B", "Answer: (C)": "C", "Both are bad": "D"}
    assert [prompts.verdict("judge_ab", x) for x in "ABCD"] == ["a", "b", "tie", "both_bad"]
    assert [prompts.verdict("judge_ba", x) for x in "ABCD"] == ["b", "a", "tie", "both_bad"]
    assert prompts.verdict("judge_ba", None) is None and prompts.verdict("judge_ba", "E") is None
    assert prompts.verdict("qa", "A") is None
    assert (prompts.shown_first("judge_ab"), prompts.shown_first("judge_ba")) == ("a", "b")


def test_the_protocol_declares_the_two_asks():
    arena = registry.get("arena")
    assert arena.query_keys == prompts.JUDGE_KEYS
    assert set(arena.resolve_queries("x", {}, seed=3)) == set(prompts.JUDGE_KEYS)
    assert arena.prompts is prompts


@pytest.mark.django_db(transaction=True)
def test_an_inference_job_on_an_arena_project_judges_every_pair_both_ways(eager, make_project, make_user, tmp_path):
    standin = StandIn(faults=False).start()
    try:
        researcher = make_user("researcher")
        project = make_project("arena-judge", "arena", members={researcher: Role.RESEARCHER})
        videos, images = clips(tmp_path), pictures(tmp_path)
        items = [make_pair(project, f"v{i}", videos) for i in range(4)]
        items += [make_pair(project, f"i{i}", images, kind="image") for i in range(2)]
        for item in items:
            item.status = ItemStatus.VERIFIED
            item.save(update_fields=["status"])
        endpoint = services.endpoint_create(
            name="standin-judge", backend="openai", model_id="standin-1", base_url=standin.base_url, concurrency=4
        )
        job = services.job_create(
            endpoint=endpoint, project=project, release=factories.release_of(project, items), params={"frames": 3}
        )
        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED, job.error
        assert job.total_queries == 12 and job.done_queries == 12 and job.failed_queries == 0
        preds = list(Prediction.objects.filter(job=job).select_related("item"))
        assert Counter(p.query for p in preds) == {"judge_ab": 6, "judge_ba": 6}
        assert all(p.status == PredictionStatus.OK and p.answer in ("A", "B", "C", "D") for p in preds)
        assert all(p.answer == p.raw_output for p in preds)
        # What the stand-in was shown: a video pair as 3 + 3 frames, an image pair as 2 images.
        shown = Counter(len(e["images"]) for e in standin.events)
        assert shown == {6: 8, 2: 4}
        asks = judging.run_asks((p.item_id, p.query, p.answer) for p in preds)
        assert set(asks) == {i.pk for i in items}
        # The stand-in's answer depends on the words and the image count alone, which both asks of a
        # pair share: it answers one letter both ways, so a pair it answers A or B flips its verdict
        # with the order (inconsistent), and a tie or both bad stays.
        letters = {}
        for p in preds:
            letters.setdefault(p.item_id, set()).add(p.answer)
        assert all(len(found) == 1 for found in letters.values())
        letter = {item: found.pop() for item, found in letters.items()}
        consistency = judging.swap_consistency(asks)
        assert consistency["n"] == 6
        assert consistency["consistent"] == sum(x in "CD" for x in letter.values())
        bias = judging.position_bias(asks)
        assert (bias["first"], bias["n"]) == (
            2 * sum(x == "A" for x in letter.values()),
            2 * sum(x in "AB" for x in letter.values()),
        )
        # The job's pages read the arena's asks like any other protocol's.
        client = session_client(researcher)
        for url in (f"/jobs/{job.pk}/", f"/jobs/{job.pk}/results.json", f"/jobs/{job.pk}/samples.jsonl"):
            assert client.get(url).status_code == 200, url
        judges = client.get(f"/api/projects/{project.slug}/judges/?release=v1").json()["judges"]
        assert [(j["judge"], j["k"], j["swap_consistency"]["n"]) for j in judges] == [("standin-judge", 1, 6)]
    finally:
        standin.stop()
