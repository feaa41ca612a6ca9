"""One rule opens a tokenizer directory: every entry point gets the same special tokens and ids.

Three kinds of directory (a real run's save_pretrained output, bare GPT-2 style files of a
trained vocab, GPT-2's own files) through each reader: `Tokenizer.from_pretrained`,
`init_from` (`load_parent`), `bpe-compare`/`bpe-show` (`load_side`) and `bpe-encode`.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bpe import Tokenizer, train_bpe
from bpe.analysis.compare.sides import load_side
from bpe.cli.encode import main as encode_main
from bpe.encode.npy import open_tokenizer
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.formats.init_from import load_parent
from bpe.formats.pretrained import open_tokenizer_dir
from tests.conftest import DATA, EOT, FIXTURES

TEXT = "Hello<|a|> there, world!" + EOT + " 123 héllo"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("dirs")
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 320, ["<|a|>", EOT], num_workers=1)
    Tokenizer(vocab, merges, ["<|a|>", EOT]).save_pretrained(root / "saved")
    save_tokenizer_files(vocab, merges, root / "bare")
    shutil.copytree(DATA / "gpt2", root / "gpt2")
    return {
        "saved": (root / "saved", ["<|a|>", EOT]),
        "bare": (root / "bare", ["<|a|>", EOT]),
        "gpt2": (root / "gpt2", [EOT]),
    }


@pytest.mark.parametrize("kind", ["saved", "bare", "gpt2"])
def test_every_reader_finds_the_same_special_tokens_and_ids(dirs, kind, tmp_path):
    path, specials = dirs[kind]
    opened = open_tokenizer_dir(path)
    assert opened.special_tokens == specials
    reference = Tokenizer(opened.vocab, opened.merges, specials, pattern=opened.pattern)
    tokenizers = {
        "from_pretrained": Tokenizer.from_pretrained(path),
        "load_side": load_side(path, heldout=False).tokenizer,
        "bpe-encode": open_tokenizer([path]),
    }
    parent = load_parent(path)
    assert parent.special_tokens == specials
    for name, tok in tokenizers.items():
        assert list(tok.special_tokens) == specials, name
        assert tok.encode(TEXT) == reference.encode(TEXT), name
    corpus, out = tmp_path / "c.txt", tmp_path / "ids.npy"
    corpus.write_text(TEXT, encoding="utf-8")
    assert (
        encode_main(
            [
                "--tokenizer",
                str(path),
                "--input",
                str(corpus),
                "--out",
                str(out),
                "--no-progress",
                "--num-workers",
                "1",
            ]
        )
        == 0
    )
    assert np.load(out).tolist() == reference.encode(TEXT)


def test_gpt2_files_encode_endoftext_as_gpt2_does(dirs):
    tok = Tokenizer.from_pretrained(dirs["gpt2"][0])
    assert tok.encode("Hello, world!" + EOT) == [15496, 11, 995, 0, 50256]


def test_a_missing_directory_names_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"init_from='.*missing' is not a directory"):
        load_parent(tmp_path / "missing")


# -- a crafted tokenizer.json: every reader names the file and the field -----------------------
def _crafted(tmp_path, kind: str):
    import json

    from bpe.formats.exports import save_exports
    from bpe.formats.gpt2_format import save_tokenizer_files

    run = tmp_path / kind
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 300, ["<|endoftext|>"])
    save_tokenizer_files(vocab, merges, run)
    save_exports(Tokenizer(vocab, merges, ["<|endoftext|>"]), run)
    path = run / "tokenizer.json"
    data = json.loads(path.read_text("utf-8"))
    if kind == "no_id":
        del data["added_tokens"][0]["id"]
    elif kind == "dict":
        data["added_tokens"] = {"a": 1}
    if kind == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000, "utf-8")
    else:
        path.write_text(json.dumps(data), "utf-8")
    return run


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("no_id", "added_tokens[0] needs an int 'id'"),
        ("dict", "added_tokens is a dict"),
        ("nested", "nests deeper than any tokenizer file"),
    ],
)
def test_a_crafted_tokenizer_json_is_named_by_every_reader(tmp_path, kind, said, capsys):
    from bpe.cli.compare import main as compare_main
    from bpe.cli.encode import main as encode_main
    from bpe.cli.show import main as show_main
    from bpe.formats.init_from import load_parent

    run = _crafted(tmp_path, kind)
    with pytest.raises(ValueError, match=r"tokenizer\.json") as err:
        Tokenizer.from_pretrained(run)
    assert said in str(err.value)
    with pytest.raises(ValueError, match=said.replace("[", r"\[").replace("]", r"\]")):
        load_parent(str(run))
    (tmp_path / "in.txt").write_text("hello", "utf-8")
    assert (
        encode_main(
            [
                "--tokenizer",
                str(run),
                "--input",
                str(tmp_path / "in.txt"),
                "--out",
                str(tmp_path / "o.npy"),
                "--no-progress",
            ]
        )
        == 2
    )
    calls = (
        lambda: show_main([str(run), "hello"]),
        lambda: compare_main([str(run), str(run), "--out", str(tmp_path / "c")]),
    )
    for call in calls:
        try:
            code = call()
        except SystemExit as exit_:
            code = exit_.code
        assert code not in (0, None)
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
