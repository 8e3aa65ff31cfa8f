"""Item import of JSON documents (the default release export, {"items": [...]} with a header): the
header is read and kept, errors name the line the item starts on, a document of another protocol is
refused, and the document is read a piece at a time (memory does not follow the file); a JSONL
export's header line is read as the header too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation.importing import items_import
from tests.helpers.files import write_lines
from tests.helpers.item_import import assert_nothing_written, refused, status_line

pytestmark = pytest.mark.django_db

# --- JSON documents (the default release export) ---------------------------------------------------


def json_document(path: Path, items: list, *, indent=None, **header) -> Path:
    path.write_text(json.dumps({**header, "items": items}, indent=indent), encoding="utf-8")
    return path


def test_json_document_imports_with_its_header(status_project, status_media):
    lines = [status_line(i) for i in range(3)]
    path = json_document(status_media / "doc.json", lines, indent=2, protocol="status", option_seed=4, version="v1")
    report = items_import(project=status_project, path=path)
    assert (report.lines, report.created) == (3, 3)
    assert report.header == {"protocol": "status", "option_seed": 4, "version": "v1"}
    item = status_project.items.get(external_id="status-00002")
    assert item.payload == {k: v for k, v in lines[2].items() if k not in ("id", "split", "tags")}
    again = items_import(project=status_project, path=path)
    assert (again.created, again.unchanged) == (0, 3)


def test_json_document_errors_name_the_line_the_item_starts_on(status_project, status_media, _media_root):
    # One item per line, as the export writes it: item N starts on line N + 1.
    good, bad = json.dumps(status_line(0)), json.dumps(status_line(1, category="diagonal"))
    (status_media / "doc.json").write_text(f'{{"protocol":"status","items":[\n{good},\n{bad}\n]}}\n')
    assert refused(status_project, status_media / "doc.json") == [
        "line 3: field category: must be one of positional, functional, other"
    ]
    # A syntax error ends the items: nothing after it can be read.
    (status_media / "doc.json").write_text(f'{{"items":[\n{good}\n{good}\n]}}\n')
    [message] = refused(status_project, status_media / "doc.json")
    assert message == "line 3: field -: invalid JSON (expected ',' or ']' after an item at line 3 column 1, found '{')"
    (status_media / "doc.json").write_text(f'{{"items":[\n{good[:-1]}, "x": ]\n]}}\n')
    assert refused(status_project, status_media / "doc.json") == [
        f"line 2: field -: invalid JSON (Expecting value at line 2 column {len(good) + 7})"
    ]
    (status_media / "doc.json").write_text(f'{{"items":[\n{good}\n]}} trailing\n')
    assert refused(status_project, status_media / "doc.json") == [
        "line 3: field -: invalid JSON (extra data after the document at line 3 column 4)"
    ]
    json_document(status_media / "doc.json", [])
    assert refused(status_project, status_media / "doc.json") == ["file: field -: holds no items"]
    assert_nothing_written(_media_root)


def test_json_document_of_another_protocol_is_refused(status_project, status_media, _media_root):
    path = json_document(status_media / "doc.json", [status_line(0)], protocol="changeit")
    assert refused(status_project, path) == [
        "file: field protocol: the file is a release export of protocol changeit, project st uses status"
    ]
    assert_nothing_written(_media_root)


def test_json_document_is_read_a_piece_at_a_time(tmp_path, monkeypatch):
    import tracemalloc

    from annotation.importing import documents, sources

    items = [
        {"id": f"x{i}", "n": i * 1001, "f": 1.5e-3, "t": True, "s": 'é ✓ \\"q\\"', "l": [None, i]} for i in range(30)
    ]
    path = json_document(tmp_path / "small.json", items, indent=1, option_seed=12)
    monkeypatch.setattr(documents, "DOC_READ_CHARS", 3)  # every number and literal crosses a chunk border
    source = sources.DirectorySource(path, tmp_path, max_bytes=1)
    assert source.header == {"option_seed": 12}
    got = list(source.lines())
    assert [json.loads(text) for _line, text in got] == items
    assert [line for line, _text in got[:2]] == [4, 15]  # indent=1: 3 opening lines, 11 lines per item

    # Memory does not follow the file: an 11 MB document is walked with a few MB at most.
    monkeypatch.setattr(documents, "DOC_READ_CHARS", 1024 * 1024)
    big = tmp_path / "big.json"
    with open(big, "w") as fh:
        fh.write('{"protocol":"status","items":[\n')
        fh.write(",\n".join(json.dumps(status_line(i, id=f"item-{i:07d}")) for i in range(40_000)))
        fh.write("\n]}\n")
    assert big.stat().st_size > 10_000_000
    source = sources.DirectorySource(big, tmp_path, max_bytes=1)
    tracemalloc.start()
    try:
        count = sum(1 for _ in source.lines())
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 40_000 and peak < 8_000_000, peak


def test_jsonl_header_line_is_read_as_the_header(status_project, status_media):
    header = {"release": {"protocol": "status", "option_seed": 9, "checksum": "abc"}}
    path = write_lines(status_media / "export.jsonl", [header, status_line(0)])
    report = items_import(project=status_project, path=path)
    assert report.lines == 1 and report.header == header["release"]
