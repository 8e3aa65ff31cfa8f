"""The README stands on its own for a newcomer: nothing it points to lies outside the repository,
it says which demo login can do what, and that the demo runs background work at once."""

import re
from pathlib import Path

from annotation.management.commands.demo import USERS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_points_at_nothing_outside_the_repository():
    assert not re.search(r"(?<![.])[.][.]/", README)  # "../x"; ".../x" is an ellipsis
    for target in re.findall(r"\]\(([^)#]+)", README):  # markdown links
        assert not target.startswith(("/", "..")), target
        if not target.startswith(("http://", "https://")):
            assert (Path(__file__).resolve().parents[1] / target).exists(), target


def test_readme_import_table_names_every_protocols_fields():
    section = README[README.index("## Importing data") : README.index("## Roles")]
    for field in (
        "image_a",
        "change_distractors",
        "distractors",
        "bbox",
        "format",
        "options",
        "video_before",
        "multiple",
        "hallucination",
        "prompt",
        "action_category",
    ):
        assert f"`{field}`" in section, field


def test_readme_lists_every_demo_login_with_its_role_and_says_jobs_run_at_once():
    for username, password, superuser, role in USERS:
        assert password == f"{username}-demo"
        row = next((line for line in README.splitlines() if line.startswith("|") and f"`{username}`" in line), None)
        assert row is not None, username
        assert ("superuser" if superuser else str(role)) in row, row
    assert "runs at once" in README and "progress bars" in README
