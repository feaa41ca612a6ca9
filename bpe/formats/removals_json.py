"""PickyBPE's removals.json: the record of which tokens a run removed, when, and into what.

A BoundlessBPE run writes the same file, with `"variant": "boundless"` and `supermerges`: the
indices in merges.txt of the merges that join two whole pretokens (`bpe.tokenizer.superwords`),
which merges.txt alone cannot say.

A `Removal` says that after `after_merges` merges, `token` left the vocab, split into `parts`.
`save_removals` / `load_removals` write and read the file (with the split pattern, which
encoding needs); `check_history` replays merges and removals on the token set and refuses a
record that does not belong with its merges and vocab.

What it does not do: encode by replaying the history (`bpe.tokenizer.removals.Replay`), or
decide what to remove (`bpe.variants.picky`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from bpe.formats.gpt2_format import render, unrender
from bpe.util.io import atomic_write_text


class Removal(NamedTuple):
    """One removal: after `after_merges` merges, `token` left the vocab, split into `parts`."""

    after_merges: int
    token: bytes
    parts: tuple[bytes, ...]


def as_removals(items: Iterable[Sequence]) -> list[Removal]:
    """`Removal`s from (after_merges, token, parts) triples (a trainer's output)."""
    return [Removal(int(a), bytes(t), tuple(bytes(p) for p in parts)) for a, t, parts in items]


def save_removals(
    removals: Sequence[Removal],
    path: str | os.PathLike,
    *,
    pattern: str,
    threshold: float | None = None,
    protect: str | None = None,
    supermerges: Sequence[int] = (),
) -> Path:
    """Write removals.json atomically (with the split pattern, the protected characters and
    BoundlessBPE's supermerges, which encoding needs)."""
    doc = {
        "variant": "boundless" if supermerges else "picky",
        "threshold": threshold,
        "pattern": pattern,
        "protect": protect,
        "removals": [
            {
                "after_merges": r.after_merges,
                "token": render(r.token),
                "parts": [render(p) for p in r.parts],
            }
            for r in removals
        ],
    }
    if supermerges:
        doc["supermerges"] = [int(k) for k in supermerges]
    out = Path(path)
    atomic_write_text(out, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    return out


def load_removals(
    path: str | os.PathLike,
) -> tuple[list[Removal], str | None, str | None, list[int]]:
    """Read removals.json: the removals, the split pattern and protected characters' regex
    recorded with them (None: not recorded), and the supermerges (empty but for BoundlessBPE).

    Raises:
        ValueError: the file is not a removals record (the message names the file).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text("utf-8"))
        removals = [
            Removal(
                int(r["after_merges"]), unrender(r["token"]), tuple(unrender(x) for x in r["parts"])
            )
            for r in doc["removals"]
        ]
        supermerges = [_index(k) for k in doc.get("supermerges", [])]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"removals file {str(p)!r} is not a PickyBPE removals record ({err}); restore it "
            "from the run, or retrain"
        ) from None
    return removals, doc.get("pattern"), doc.get("protect"), supermerges


def _index(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"supermerge {value!r} is not a merge index")
    return value


def events(
    merges: Sequence[tuple[bytes, bytes]], removals: Sequence[Removal]
) -> list[tuple[bytes, bytes] | Removal]:
    """Merges and removals in the order they happened (a removal follows the merge it counts)."""
    out: list[tuple[bytes, bytes] | Removal] = []
    pending = sorted(removals, key=lambda r: r.after_merges)  # stable: same-time order kept
    k = 0
    for rank, merge in enumerate(merges):
        while k < len(pending) and pending[k].after_merges <= rank:
            out.append(pending[k])
            k += 1
        out.append(merge)
    out.extend(pending[k:])
    return out


def check_history(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    removals: Sequence[Removal],
    *,
    source: str = "merges",
) -> None:
    """Replay the history on the token set: each merge's parts present when it happens, each
    removed token present and split into present parts, and the tokens left are the vocab's.

    Raises:
        ValueError: naming the first event that does not fit, or a token the vocab lacks.
    """
    singles = {bytes([b]) for b in range(256)}
    live = set(singles)
    for event in events(merges, removals):
        if isinstance(event, Removal):
            if event.token not in live or any(p not in live for p in event.parts):
                raise ValueError(
                    f"{source}: removal of {render(event.token)!r} after "
                    f"{event.after_merges} merges does not fit the merges before it; the "
                    "removals, merges and vocab files do not belong together"
                )
            if b"".join(event.parts) != event.token:
                raise ValueError(
                    f"{source}: removal of {render(event.token)!r} splits it into parts that "
                    "do not spell it; the removals file is damaged"
                )
            live.discard(event.token)
            continue
        a, b = event
        if a not in live or b not in live:
            raise ValueError(
                f"{source}: merge ({render(a)} {render(b)}) uses a token that is not present "
                "at that point of the history; the removals, merges and vocab files do not "
                "belong together"
            )
        live.add(a + b)
    known = set(vocab.values())
    missing = sorted(live - known)
    if missing:
        raise ValueError(
            f"{source}: token {render(missing[0])!r} is present after the history but not in "
            "the vocab; the removals, merges and vocab files do not belong together"
        )
