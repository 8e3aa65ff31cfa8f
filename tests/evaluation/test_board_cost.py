"""Tokens, cost and cost per correct answer on the board: the page's main table and the
CSV download show them where some row's endpoint has a price, the JSON rows always carry them.

The board is test_power's counting board (three models on 16 questions; mid right on 4). mid's job
gets an endpoint priced $2.5 per million prompt tokens and $10 per million reply tokens, and
100,000 + 20,000 tokens: 100,000 · 2.5 / 10⁶ + 20,000 · 10 / 10⁶ = $0.25 + $0.20 = $0.45, over
4 correct answers $0.1125 each."""

import csv
import io
import re
from decimal import Decimal

import pytest
from django.http import HttpRequest

from evaluation import tables
from inference import services
from inference.models import InferenceJob

from .test_power import counting_project  # noqa: F401 (the fixture: three models on 16 questions, 2 per scene)

pytestmark = pytest.mark.django_db

USAGE_HEADERS = ["Tokens", "Cost", "Cost per correct answer"]


@pytest.fixture
def priced(counting_project):  # noqa: F811
    endpoint = services.endpoint_create(
        name="mid", backend="random", price_per_1m_input=Decimal("2.5"), price_per_1m_output=Decimal("10")
    )
    updated = InferenceJob.objects.filter(project=counting_project, model_name="mid").update(
        endpoint=endpoint, prompt_tokens=100_000, completion_tokens=20_000
    )
    assert updated == 1
    return counting_project


def _signed_in(client):
    client.login(request=HttpRequest(), username="res", password="pw")
    return client


def _main_panel(client) -> str:
    html = client.get("/projects/vtp/leaderboard/").content.decode()
    return html.split('id="panel-main"', 1)[1].split("</section>", 1)[0]


def _usage_cells(panel: str, model: str) -> list[tuple[str, str]]:
    row = panel.split(f'<tr data-model="{model}"', 1)[1].split("</tr>", 1)[0]
    return re.findall(r'<td class="lb-usage" data-value="([^"]*)"[^>]*>([^<]*)</td>', row)


def test_the_page_shows_tokens_and_cost_of_a_priced_job(client, priced):
    panel = _main_panel(_signed_in(client))
    assert re.findall(r'data-usage="[^"]+"[^>]*>([^<]+)</th>', panel) == USAGE_HEADERS
    tokens, cost, per_correct = _usage_cells(panel, "mid")
    assert tokens == ("120000", "120,000")
    assert cost == ("0.45", "$0.45")
    assert per_correct == ("0.1125", "$0.1125")
    assert 'title="100,000 in, 20,000 out"' in panel and 'title="4 correct answers"' in panel
    # Imported answers without an endpoint (and Random, where the board has it): no cost, a dash.
    for model in ("good", "bad"):
        assert _usage_cells(panel, model) == [("", "–")] * 3
    # The legend explains the new columns.
    assert "<dt>Cost per correct answer</dt>" in client.get("/projects/vtp/leaderboard/").content.decode()
    # A breakdown tab has no usage columns.
    html = client.get("/projects/vtp/leaderboard/").content.decode()
    for panel_html in html.split('class="lb-panel"')[2:]:
        assert "data-usage=" not in panel_html.split("</section>", 1)[0]


def test_the_csv_carries_tokens_and_cost_after_the_metrics(client, priced):
    body = _signed_in(client).get("/projects/vtp/leaderboard/download/csv/").content.decode()
    lines = list(csv.reader(io.StringIO(body)))
    header = lines[0]
    assert header[-4:] == ["tokens_in", "tokens_out", "cost_usd", "cost_per_correct_usd"]
    assert all(len(line) == len(header) for line in lines)
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(body))}
    mid = rows["mid"]
    assert (mid["tokens_in"], mid["tokens_out"], mid["cost_usd"], mid["cost_per_correct_usd"]) == (
        "100000",
        "20000",
        "0.450000",
        "0.112500",
    )
    # An imported job's row: nobody counted its tokens and it has no price: empty cells.
    good = rows["good"]
    assert (good["tokens_in"], good["tokens_out"], good["cost_usd"], good["cost_per_correct_usd"]) == ("", "", "", "")
    # The API's CSV is the same table.
    api = _signed_in(client).get("/api/projects/vtp/leaderboard/?fmt=csv").content.decode()
    assert api == body


def test_the_json_rows_carry_usage(client, priced):
    signed_in = _signed_in(client)
    for query in ("", "?details=1"):
        rows = {r["model"]: r for r in signed_in.get(f"/api/projects/vtp/leaderboard/{query}").json()["rows"]}
        assert rows["mid"]["usage"] == {
            "prompt_tokens": 100_000,
            "completion_tokens": 20_000,
            "cost_usd": 0.45,
            "correct": 4,
            "cost_per_correct_usd": 0.1125,
        }
        assert rows["good"]["usage"]["cost_usd"] is None and rows["good"]["usage"]["correct"] == 16
    download = signed_in.get("/projects/vtp/leaderboard/download/json/").json()
    assert next(r for r in download["rows"] if r["model"] == "mid")["usage"]["cost_per_correct_usd"] == 0.1125


def test_a_board_without_prices_shows_no_cost(client, counting_project):  # noqa: F811
    signed_in = _signed_in(client)
    html = signed_in.get("/projects/vtp/leaderboard/").content.decode()
    assert "data-usage=" not in html and 'class="lb-usage"' not in html
    assert "<dt>Cost</dt>" not in html
    header = next(csv.reader(io.StringIO(signed_in.get("/projects/vtp/leaderboard/download/csv/").content.decode())))
    assert not {"tokens_in", "tokens_out", "cost_usd", "cost_per_correct_usd"} & set(header)
    # The JSON still says what is known: tokens, no cost.
    rows = signed_in.get("/api/projects/vtp/leaderboard/").json()["rows"]
    mid = next(r for r in rows if r["model"] == "mid")
    assert mid["usage"]["cost_usd"] is None and mid["usage"]["cost_per_correct_usd"] is None


def test_a_breakdown_csv_has_no_usage_and_the_chance_row_is_padded():
    row = {
        "model": "m",
        "n": 4,
        "parse_failures": 0,
        "metrics": {"acc_osi": 50.0},
        "ci": {"acc_osi": [25.0, 75.0]},
        "breakdowns": {"category:positional:acc_osi": {"value": 40.0, "ci": [20.0, 60.0]}},
        "usage": {
            "prompt_tokens": 1000,
            "completion_tokens": 10,
            "cost_usd": 0.0025,
            "correct": 2,
            "cost_per_correct_usd": 0.00125,
        },
    }
    board = {"project": "p", "release": None, "protocol": "status", "cluster_key": None, "rows": [row]}
    main = list(csv.reader(io.StringIO(tables.render_leaderboard(board, "csv"))))
    assert main[0][-4:] == list(tables.USAGE_COLUMNS)
    assert main[1][-4:] == ["1000", "10", "0.002500", "0.001250"]
    assert main[2][0] == "Chance" and len(main[2]) == len(main[0]) and main[2][-4:] == [""] * 4
    tab = tables.render_leaderboard(board, "csv", breakdown="category:positional").splitlines()
    assert tab[0] == "model,rank,n,parse_failures,acc_osi,acc_osi_ci_lo,acc_osi_ci_hi"
    assert tab[1] == "m,,4,0,40.00,20.00,60.00"


def test_tokens_are_unknown_only_without_tokens_and_price():
    def row(tokens_in, tokens_out, cost):
        usage = {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "cost_usd": cost}
        return {"usage": {**usage, "correct": 3, "cost_per_correct_usd": None}}

    assert tables.usage_tokens({"model": "Random"}) is None
    assert tables.usage_tokens(row(0, 0, None)) is None  # imported answers: nobody counted
    assert tables.usage_tokens(row(0, 0, 0.0)) == (0, 0)  # priced, every answer from the cache
    assert tables.usage_tokens(row(12, 3, None)) == (12, 3)  # counted, no price
    assert tables.usage_cells(row(0, 0, 0.0)) == ["0", "0", "0.000000", ""]
