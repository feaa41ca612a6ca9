"""bpe-show: token pieces in brackets, ANSI colours on a real terminal, HTML for notebooks."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.cli.show import TokenView, load_tokenizer, show
from tests.conftest import DATA, FIXTURES, ROOT

RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
GPT2 = load_tokenizer(DATA / "gpt2")


def test_gpt2_pieces_in_brackets():
    view = show(DATA / "gpt2", "Hello world\n", label="gpt2")
    assert view.plain() == "[Hello][ world][↵]"
    assert view.plain(ids=True) == "[Hello:15496][ world:995][↵:198]"
    assert view.summary() == "gpt2: 3 tokens, 12 bytes (4.00 bytes/token)"


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=40))
def test_pieces_give_back_the_text(text):
    view = TokenView.of(GPT2, text)
    assert b"".join(view.pieces) == text.encode("utf-8")


def test_split_characters_are_escaped_and_html_is_escaped():
    view = show(RUN, "<b>ü</b>")  # a 300-token vocab splits ü into two byte tokens
    assert "\\xc3" in view.plain() and "\\xbc" in view.plain()
    page = view._repr_html_()
    assert "&lt;" in page and "<b>" not in page.split("</b></div>", 1)[1]
    assert page.count("<span") == len(view.ids)


def _run(*args: str, tty: bool) -> str:
    cmd = [sys.executable, "-m", "bpe.cli.show", *args]
    if not tty:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.Popen(cmd, stdout=follower, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal closes when the process exits
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8")


def test_terminal_gets_colours_and_a_pipe_gets_brackets():
    piped = _run(str(DATA / "gpt2"), "Hello world", tty=False)
    assert piped.splitlines()[0] == "[Hello][ world]"
    coloured = _run(str(DATA / "gpt2"), "Hello world", tty=True)
    assert "\033[30;48;5;153mHello\033[0m" in coloured and "[Hello]" not in coloured
    plain = _run(str(DATA / "gpt2"), "Hello world", "--plain", tty=True)
    assert "[Hello][ world]" in plain and "\033[" not in plain


def test_missing_directory_is_an_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.cli.show", str(tmp_path), "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "neither a run directory" in proc.stderr
