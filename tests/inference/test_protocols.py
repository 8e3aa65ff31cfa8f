"""Protocol modules turn one item into its queries (pure code; media from real small files)."""

from annotation.protocols import resolve_queries
from inference import media as media_lib
from inference.prompting import MediaPreparer
from protocols.changeit import prompts as changeit
from protocols.kit.prompting import ItemInput
from protocols.m3verse import prompts as m3verse
from protocols.oscbench import prompts as oscbench
from protocols.status import prompts as status
from protocols.visualtrans import prompts as visualtrans

from .factories import image_file


def _item(payload, paths, resolved, hashes=None):
    return ItemInput(
        item_pk=7, external_id="x1", payload=payload, media_paths=paths, media_hashes=hashes or {}, resolved=resolved
    )


STATUS_PAYLOAD = {
    "image_a": "a.png",
    "image_b": "b.png",
    "state_a": "a closed jar",
    "state_b": "an open jar",
    "change": "open the jar",
    "change_distractors": ["shake the jar", "fill the jar", "drop the jar"],
    "category": "functional",
    "difference": "significant",
}


def test_status_six_queries_with_seeded_option_orders(tmp_path):
    paths = {
        "image_a": str(image_file(tmp_path / "a.png", (10, 20, 30))),
        "image_b": str(image_file(tmp_path / "b.png", (200, 0, 0))),
    }
    resolved = resolve_queries("status", "x1", STATUS_PAYLOAD, seed=3)
    out = status.build(_item(STATUS_PAYLOAD, paths, resolved), media=MediaPreparer(cache_root=tmp_path), params={})
    assert [q.key for q in out] == ["osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4"]
    assert [q.query.key for q in out][:2] == ["7|osi_a", "7|osi_b"]
    assert [q.prompt.count("<image") for q in out] == [1, 1, 2, 2, 2, 2]
    assert out[0].options == ["a closed jar", "an open jar"] and out[0].query.choices == ["A", "B"]
    assert "A. a closed jar\nB. an open jar" in out[0].prompt
    assert "Which photo shows a closed jar?" in out[2].prompt and "shows an open jar?" in out[3].prompt
    assert out[5].options == resolved["sci4"]["options"] and out[5].query.choices == ["A", "B", "C", "D"]
    assert sorted(out[5].options) == sorted(["open the jar", "shake the jar", "fill the jar", "drop the jar"])
    # Different images in osi_a / osi_b: the data URLs differ.
    assert out[0].query.messages[0]["content"][0] != out[1].query.messages[0]["content"][0]


def test_status_missing_image_fails_every_query_of_the_item(tmp_path):
    resolved = resolve_queries("status", "x1", STATUS_PAYLOAD, seed=3)
    out = status.build(
        _item(STATUS_PAYLOAD, {"image_a": None, "image_b": None}, resolved),
        media=MediaPreparer(cache_root=tmp_path),
        params={},
    )
    assert [(q.key, q.error) for q in out] == [(k, "the item has no such image") for k in resolved]


def test_changeit_ten_candidates_full_and_crop_from_the_annotated_box(tmp_path):
    path = str(image_file(tmp_path / "i.png", (0, 0, 0), size=(800, 600)))
    payload = {
        "image": "i.png",
        "object": "apple",
        "state": "whole apple",
        "distractors": ["peeled apple", "sliced apple"],
        "bbox": [100, 100, 200, 100],
    }
    vocab = {"apple": ["whole apple", "peeled apple", "apple core"], "egg": [f"egg state {i}" for i in range(12)]}
    resolved = resolve_queries("changeit", "x1", payload, seed=1, vocabulary=vocab)
    out = changeit.build(_item(payload, {"image": path}, resolved), media=MediaPreparer(cache_root=tmp_path), params={})
    assert [q.key for q in out] == [
        "state:standard:full",
        "state:standard:crop",
        "state:distractor:full",
        "state:distractor:crop",
    ]
    assert all(len(q.options) == 10 and q.query.choices == [str(i) for i in range(1, 11)] for q in out)
    assert "This photo shows an apple." in out[0].prompt and "(1 to 10)" in out[0].prompt
    full_url = out[0].query.messages[0]["content"][0]["image_url"]["url"]
    crop_url = out[1].query.messages[0]["content"][0]["image_url"]["url"]
    import base64
    import io

    from PIL import Image

    sizes = [Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).size for u in (full_url, crop_url)]
    assert sizes == [(448, 336), (200, 100)]
    no_box = dict(payload, bbox=None)
    out = changeit.build(_item(no_box, {"image": path}, resolved), media=MediaPreparer(cache_root=tmp_path), params={})
    assert [q.error for q in out] == [
        None,
        "the item has no annotated box to crop",
        None,
        "the item has no annotated box to crop",
    ]
    nothing = dict(payload, bbox="nothing_to_label")  # the annotators found no such object to box
    out = changeit.build(_item(nothing, {"image": path}, resolved), media=MediaPreparer(cache_root=tmp_path), params={})
    assert [q.error for q in out] == [
        None,
        "the item has no box to crop (nothing_to_label)",
        None,
        "the item has no box to crop (nothing_to_label)",
    ]


def test_visualtrans_formats_choose_reply_rules(tmp_path):
    paths = [str(image_file(tmp_path / f"{i}.png", (i, i, i))) for i in range(3)]
    for fmt, options, expect, choices in (
        ("choice", ["red", "blue"], "Answer with the letter of the correct option (A, B)", ["A", "B"]),
        ("count", [], "Answer with a single whole number", None),
        ("set", [], "List every correct answer, separated by commas", None),
    ):
        payload = {
            "images": ["0.png", "1.png", "2.png"],
            "question": "Q?",
            "format": fmt,
            "options": options,
            "answer": "A",
        }
        resolved = resolve_queries("visualtrans", "x1", payload, seed=0)
        (q,) = visualtrans.build(
            _item(payload, {"images": paths}, resolved), media=MediaPreparer(cache_root=tmp_path), params={}
        )
        assert expect in q.prompt and q.query.choices == choices and q.fmt == fmt
        assert "Image 3 (candidate):\n<image 3>" in q.prompt


def test_m3verse_frames_of_both_videos_and_the_number_of_correct_options(tmp_path):
    video = str(media_lib.make_test_video(tmp_path / "v.mp4", seconds=2, size="64x48", rate=10))
    base = {
        "video_before": "v.mp4",
        "video_after": "v.mp4",
        "question": "What moved?",
        "options": ["cup", "chair", "lamp", "none of these"],
    }
    paths = {"video_before": video, "video_after": video}
    prep = MediaPreparer(cache_root=tmp_path / "c")
    single = dict(base, answer=["B"], multiple=False)
    (q,) = m3verse.build(
        _item(single, paths, resolve_queries("m3verse", "x1", single, seed=0)), media=prep, params={"frames": 4}
    )
    assert q.frame_indices == {"video_before": [2, 7, 12, 17], "video_after": [2, 7, 12, 17]}
    assert q.prompt.count("<image") == 8
    assert "Video BEFORE the change, 4 frames in order:" in q.prompt and "Video AFTER the change" in q.prompt
    assert "Exactly one option is correct." in q.prompt and q.query.choices == ["A", "B", "C", "D"]
    several = dict(base, answer=["A", "C"], multiple=True)
    (q,) = m3verse.build(
        _item(several, paths, resolve_queries("m3verse", "x1", several, seed=0)), media=prep, params={"frames": 4}
    )
    assert "One or more options may be correct." in q.prompt
    assert q.query.choices == [
        "A",
        "B",
        "C",
        "D",
        "A,B",
        "A,C",
        "A,D",
        "B,C",
        "B,D",
        "C,D",
        "A,B,C",
        "A,B,D",
        "A,C,D",
        "B,C,D",
        "A,B,C,D",
    ]


def test_m3verse_prompt_never_depends_on_the_answer(tmp_path):
    # docs/protocols/m3verse.md: the number of correct options comes from `multiple` (or the project's
    # setting), so a model is told the same for a one-letter and a two-letter truth.
    video = str(media_lib.make_test_video(tmp_path / "v.mp4", seconds=2, size="64x48", rate=10))
    base = {
        "video_before": "v.mp4",
        "video_after": "v.mp4",
        "question": "What moved?",
        "options": ["cup", "chair", "lamp"],
    }
    paths = {"video_before": video, "video_after": video}
    prep = MediaPreparer(cache_root=tmp_path / "c")
    built = {}
    for name, answer in (("one", ["B"]), ("two", ["A", "C"]), ("unlabeled", None)):
        payload = dict(base, **({"answer": answer} if answer else {}))
        resolved = (
            resolve_queries("m3verse", "x1", payload, seed=0)
            if answer
            else {"qa": {"options": base["options"], "answer": None}}
        )
        item = _item(payload, paths, resolved)
        (built[name],) = m3verse.build(item, media=prep, params={"frames": 2})
        item.project_settings = {"multiple": False}
        (built[name + "-single"],) = m3verse.build(item, media=prep, params={"frames": 2})
    assert len({(q.prompt, tuple(q.query.choices)) for k, q in built.items() if not k.endswith("-single")}) == 1
    assert len({(q.prompt, tuple(q.query.choices)) for k, q in built.items() if k.endswith("-single")}) == 1
    assert "One or more options may be correct." in built["one"].prompt
    assert "Exactly one option is correct." in built["two-single"].prompt


def test_oscbench_judge_prompt_rubric_and_schema(tmp_path):
    video = str(media_lib.make_test_video(tmp_path / "v.mp4", seconds=3, size="64x48", rate=10))
    payload = {"video": "v.mp4", "prompt": "a candle melts"}
    resolved = resolve_queries("oscbench", "x1", payload, seed=0)
    (q,) = oscbench.build(
        _item(payload, {"video": video}, resolved), media=MediaPreparer(cache_root=tmp_path), params={}
    )
    assert q.frame_indices == {"video": [0, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 23, 24, 26, 27, 29]}
    assert q.prompt.count("<image") == 20 and 'The prompt given to the model was: "a candle melts"' in q.prompt
    assert "- osc_consistency: Does the object's state change progress plausibly" in q.prompt
    assert q.query.json_schema["required"] == ["evidence", "scores"]
    assert list(q.query.json_schema["properties"]) == ["evidence", "scores"]  # evidence first
    assert q.query.json_schema["properties"]["scores"]["properties"]["scene"]["anyOf"][1] == {"type": "null"}
    assert oscbench.rubric_text("Rate it.") == "Rate it."


def test_json_queries_are_exactly_the_queries_asked_under_a_json_schema(tmp_path):
    # prompting.json_queries names the queries whose replies can be unreadable replies (listed,
    # retried, given their reason by a re-score); the chunk repairs the queries built with a
    # json_schema. The two must agree, protocol by protocol.
    from inference import prompting

    prep = MediaPreparer(cache_root=tmp_path)
    video = str(media_lib.make_test_video(tmp_path / "v.mp4", seconds=1, size="64x48", rate=10))
    osc = {"video": "v.mp4", "prompt": "a candle melts"}
    built = {
        ("oscbench", False): oscbench.build(
            _item(osc, {"video": video}, resolve_queries("oscbench", "x1", osc, seed=0)),
            media=prep,
            params={"frames": 2},
        )
    }
    paths = {
        "image_a": str(image_file(tmp_path / "a.png", (10, 20, 30))),
        "image_b": str(image_file(tmp_path / "b.png", (200, 0, 0))),
    }
    item = _item(STATUS_PAYLOAD, paths, resolve_queries("status", "x1", STATUS_PAYLOAD, seed=3))
    built[("status", False)] = status.build(item, media=prep, params={})
    built[("status", True)] = status.build_suggestion(item, media=prep, params={})
    vt = {"images": ["a.png", "b.png"], "question": "Q?", "format": "choice", "options": ["red", "blue"], "answer": "A"}
    built[("visualtrans", False)] = visualtrans.build(
        _item(vt, {"images": [paths["image_a"], paths["image_b"]]}, resolve_queries("visualtrans", "x1", vt, seed=0)),
        media=prep,
        params={},
    )
    asked = {where: [(q.key, q.query.json_schema is not None) for q in queries] for where, queries in built.items()}
    assert asked == {
        ("oscbench", False): [("judge", True)],
        ("status", False): [(k, False) for k in ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")],
        ("status", True): [("suggest", True)],
        ("visualtrans", False): [("qa", False)],
    }
    for (name, suggest), pairs in asked.items():
        assert prompting.json_queries(name, suggest=suggest) == tuple(k for k, json_schema in pairs if json_schema)
    # The other protocols ask letters and numbers only (their builds, above in this file, set
    # choices and no schema).
    assert [prompting.json_queries(name) for name in ("changeit", "m3verse")] == [(), ()]
    assert [prompting.json_queries(name, suggest=True) for name in ("visualtrans", "m3verse")] == [(), ()]
