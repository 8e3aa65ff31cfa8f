"""The arena's review in Chromium: the reviewer's item page shows each rater's votes per criterion
in a/b terms with the models named (reviewers may see them), and the merged answer picks the
winner per criterion; the annotate page preloads the next pair's two outputs; the votes board says
what its intervals are and prints counts as whole numbers. The form description the server sends
(protocols/arena/workflow.py ``form``) carries all of it: review.js never names the arena."""

from __future__ import annotations

import pytest

from annotation.importing.samples import make_video
from annotation.models import Annotation, Item, ItemStatus, Project, Review, Role
from protocols.arena import workflow
from tests.protocols.arena.helpers import MODEL_NAMES, make_pair

from .work_helpers import annotate_through_queue, served_media_root, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ALPHA, BETA, GAMMA = MODEL_NAMES


def distinct_clips(tmp_path, first: int) -> tuple[str, str]:
    return (
        store(make_video(tmp_path / f"c{first}.mp4", first, frames=6, fps=6), "video"),
        store(make_video(tmp_path / f"c{first + 1}.mp4", first + 1, frames=6, fps=6), "video"),
    )


@pytest.fixture
def arena(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    r1, r2, rev, researcher = make_user("rater1"), make_user("rater2"), make_user("rev"), make_user("researcher")
    project = make_project(
        "duel",
        "arena",
        members={r1: Role.ANNOTATOR, r2: Role.ANNOTATOR, rev: Role.REVIEWER, researcher: Role.RESEARCHER},
        annotations_per_item=2,
        option_seed=5,
        name="Duel",
        # The votes below come through the queue at once; the viewing checks are test_arena.py's.
        settings={"arena_min_view_seconds": 0},
    )
    item = make_pair(project, "p0", distinct_clips(tmp_path, 0), models=(ALPHA, BETA))
    # Screen terms, as the form submits them: rater1 saw b on the left and preferred it. The server
    # draws the sides from (option seed, item, annotator): a seed giving rater1 "ba" is picked.
    seed = next(s for s in range(100) if workflow.shown_order(s, str(item.pk), str(r1.pk)) == "ba")
    Project.objects.filter(pk=project.pk).update(option_seed=seed)
    project.refresh_from_db()
    annotate_through_queue(project, r1, [{"shown": "ba", "votes": {"overall": "left", "state_change": "tie"}}])
    # rater2 preferred a, on whichever side the server showed it.
    shown = workflow.shown_order(seed, str(item.pk), str(r2.pk))
    annotate_through_queue(
        project, r2, [{"shown": shown, "votes": {"overall": "left" if shown[0] == "a" else "right"}}]
    )
    item.refresh_from_db()
    assert item.status == ItemStatus.ANNOTATED
    return project, item


def test_the_reviewer_reads_each_raters_votes_and_picks_the_winner(page, login, live_server, arena):
    project, item = arena
    login(page, "rev")
    page.goto(f"{live_server.url}/projects/duel/review/{item.pk}/")
    page.wait_for_selector("table.compare")
    # Both outputs, labelled with their side and model.
    labels = page.locator("[data-review-media] figcaption").all_inner_texts()
    assert labels == [f"A · {ALPHA}", f"B · {BETA}"]
    assert page.locator("[data-review-media] video").count() == 2
    assert ALPHA in page.inner_text("[data-review-text]") and BETA in page.inner_text("[data-review-text]")

    heads = page.locator("thead .annotation-head").all_inner_texts()
    assert heads[0].startswith("rater1") and heads[1].startswith("rater2")

    def cells(field):
        return page.locator(f'tr[data-field="{field}"] td.value').all_inner_texts()

    assert cells("overall") == [f"B better ({BETA})", f"A better ({ALPHA})"]
    assert cells("state_change") == ["Tie", "—"]
    r2_shown = Annotation.objects.get(item=item, annotator__username="rater2").result["shown"]
    assert cells("shown") == ["B left, A right", workflow.SHOWN_LABELS[r2_shown]]
    assert page.locator('tr[data-field="overall"]').get_attribute("class") == "disagree"

    # The merged answer: a winner per criterion, in the item's terms.
    page.keyboard.press("e")
    overall = page.locator("[data-editor] select[data-choice=overall]")
    assert overall.locator("option").all_inner_texts() == [
        f"A better ({ALPHA})",
        f"B better ({BETA})",
        "Tie",
        "Both bad",
    ]
    assert overall.input_value() == "b"  # started from rater1's answer
    overall.select_option("a")
    page.locator("[data-editor] select[data-choice=state_change]").select_option("both_bad")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => document.querySelector('[data-review-detail]').dataset.decided === 'edit'")
    review = Review.objects.get(item=item)
    assert review.decision == "edit"
    assert review.result == {"winner": "a", "criteria": {"state_change": "both_bad"}}
    assert Item.objects.get(pk=item.pk).status == ItemStatus.VERIFIED


def test_the_annotate_page_preloads_the_next_pairs_outputs(
    page, login, live_server, settings, make_user, make_project, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    voter = make_user("voter")
    project = make_project("pre", "arena", members={voter: Role.ANNOTATOR}, annotations_per_item=1, option_seed=3)
    make_pair(project, "first", distinct_clips(tmp_path, 10), models=(ALPHA, BETA))
    make_pair(project, "second", distinct_clips(tmp_path, 20), models=(BETA, GAMMA))
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    login(page, "voter")
    page.goto(f"{live_server.url}/projects/pre/annotate/")
    nxt = page.wait_for_function(
        "() => window.statelabWorkbench.preloaded && window.statelabWorkbench.preloaded.item", timeout=15_000
    ).json_value()
    urls = [nxt["left"]["url"], nxt["right"]["url"]]
    assert set(nxt) >= {"left", "right", "shown"} and not {"video_a", "video_b", "model_a", "model_b"} & set(nxt)
    page.wait_for_function(
        "(urls) => urls.every((u) => performance.getEntriesByType('resource').some((e) => e.name.endsWith(u)))",
        arg=urls,
        timeout=15_000,
    )
    shown = page.locator("video").evaluate_all("vs => vs.map(v => v.getAttribute('src'))")
    assert not set(urls) & set(shown)  # the next pair's, not the pair on screen
    assert any(u.endswith(urls[0]) for u in requested) and any(u.endswith(urls[1]) for u in requested)


def test_the_votes_board_says_what_its_intervals_are(page, login, live_server, arena):
    login(page, "researcher")
    page.goto(f"{live_server.url}/projects/duel/leaderboard/")
    text = page.inner_text("#lb-intervals")
    assert "bootstrap interval over items" not in text
    assert "95 % sandwich (robust) interval on the Bradley–Terry–Davidson fit" in text
    heads = page.locator("#panel-main thead th").all_inner_texts()
    columns = [heads.index(name) for name in ("Battles", "Ties", "Both bad")]
    rows = page.locator("#panel-main tbody tr").all()
    assert len(rows) == 2
    for row in rows:
        cells = row.locator("td").all_inner_texts()
        assert [cells[i] for i in columns] == ["2", "0", "0"]
