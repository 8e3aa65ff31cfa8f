"""The progress bar (statelab_client/progress.py): redrawn in place on a terminal; in a file or a
pipe one line only, the final one, however many updates came before."""

from __future__ import annotations

import io

from statelab_client.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_only_the_final_line_is_written():
    log = io.StringIO()
    bar = Progress("upload", stream=log, width=4)
    for n in range(10):
        bar.update(n / 10, f"{n} of 10", force=n == 5)
    assert log.getvalue() == ""
    bar.close("done")
    assert log.getvalue() == "upload [####] 100.0% done\n"


def test_on_a_terminal_the_bar_is_redrawn_in_place_and_ends_with_a_newline():
    screen = Terminal()
    bar = Progress("upload", stream=screen, width=4, redraw=0)
    bar.update(0.5, "half")
    bar.close("done")
    assert screen.getvalue() == "\rupload [##..]  50.0% half\rupload [####] 100.0% done\n"


def test_a_quiet_bar_writes_nothing():
    log = io.StringIO()
    bar = Progress("upload", stream=log, enabled=False)
    bar.update(0.5)
    bar.close()
    assert log.getvalue() == ""
