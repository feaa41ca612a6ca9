"""ANALYSIS.md's sections about the tokenizer: its longest tokens, compression, bits per
byte, throughput and the tiktoken check, each a pure function of metrics.json's content.

What it does not do: read files (`bpe.analysis.run_facts`) or describe the run
(`bpe.analysis.run_sections`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from bpe.analysis.markdown import clip, fmt, table
from bpe.measures import RARE_MERGE_COUNT, TOKEN_KINDS, pile_projection, token_kind
from bpe.runs import schema
from bpe.runs.layout import (
    FIGURES,
)

logger = logging.getLogger(__name__)


#: Characters of a token shown in a table cell (longer ones are clipped, see `shown`).
CELL_WIDTH = 40


def section_longest_tokens(metrics: dict, figures_made: frozenset[str]) -> list[str]:
    lines = ["## Longest tokens", ""]
    longest = metrics.get("longest_tokens") or []
    if longest:
        rows = [
            [
                k + 1,
                t["id"],
                t["bytes"],
                fmt(t.get("merge_count"), "d"),
                f"`{shown(t, 'gpt2')}`",
                shown(t, "text", repr),
            ]
            for k, t in enumerate(longest)
        ]
        headers = ["#", "id", "bytes", "merge count", "GPT-2 rendering", "text"]
        lines += [table(rows, headers), ""]
        lines += [_longest_judgement(longest, metrics), ""]
    support = merge_support_sentence(metrics)
    if support:
        lines += [support, ""]
    if "lengths" in figures_made:
        lines += [f"![token lengths]({FIGURES['lengths']})", ""]
    if "merge_counts" in figures_made:
        lines += [f"![merge counts]({FIGURES['merge_counts']})", ""]
    return lines


def shown(token: dict, key: str, how=str) -> str:
    """A longest-tokens cell: the recorded preview, clipped to a table's width with `…`.

    metrics.json keeps at most a preview of long tokens (`clipped`; the full bytes are in
    vocab.json); older runs kept the whole token, which this clips too.

    >>> shown({"text": "ab", "clipped": False}, "text", repr)
    "'ab'"
    >>> shown({"text": "ab", "clipped": True}, "text")
    'ab…'
    """
    cell = how(token[key])
    if token.get("clipped"):  # the bytes column says how long it really is
        return cell[:CELL_WIDTH] + "…"
    return clip(cell, CELL_WIDTH)


def _origin(side: dict, name: str) -> str:
    """Where a measured side's documents come from, for a table cell.

    >>> _origin({"source": "input_tail", "seen_in_training": False}, "own")
    'held out: the end of the training input, not trained on'
    """
    if side.get("source") != "input_tail":
        return f"{'same' if name == 'own' else 'other'} domain"
    if side.get("seen_in_training", True):
        return "end of the training input, seen in training"
    return "held out: the end of the training input, not trained on"


def _held_out(side: dict) -> str:
    """`held out: the last 40 documents (0.21 MB) of the input, not trained on`.

    >>> _held_out({"heldout_docs": 40, "heldout_bytes": 210_000})
    'held out: the last 40 documents (0.21 MB) of the input, not trained on'
    """
    return (
        f"held out: the last {side.get('heldout_docs')} documents "
        f"({fmt(side.get('heldout_bytes', 0) / 1e6, '.2f')} MB) of the input, not trained on"
    )


def section_compression(metrics: dict) -> list[str]:
    lines = ["## Compression", ""]
    comp = metrics.get("compression") or {}
    rows = []
    # "other" is the run's cross-domain dataset (the key metrics.json stores it under)
    for side in ("own", "other"):
        c = comp.get(side)
        if not c:
            continue
        ratio = c.get("ratio")
        base = c.get("gpt2_ratio")
        where = f"{c['dataset']} ({_origin(c, side)})"
        rows.append(
            [
                where,
                c["docs"],
                c["bytes"],
                fmt(ratio),
                fmt(base),
                fmt(ratio / base if ratio and base else None, ".2f"),
            ]
        )
    if not rows:
        return [*lines, "No held-out documents were measured.", "", *_tiktoken_lines(metrics)]
    lines += [
        table(
            rows,
            [
                "held-out documents",
                "docs",
                "bytes",
                "bytes/token (ours)",
                "bytes/token (GPT-2)",
                "ours / GPT-2",
            ],
        ),
        "",
    ]
    own, other = comp.get("own"), comp.get("other")
    if own and own.get("source") == "input_tail" and not own.get("seen_in_training", True):
        lines += [
            f"*{own['dataset']} has no held-out file; {_held_out(own)}. {own['docs']} of them "
            f"were measured here (from {Path(own['file']).name}). `dataset.heldout_fraction` "
            "and `dataset.heldout_max_bytes` set how many are held out; "
            "`dataset.heldout_path=...` names held-out text instead.*",
            "",
        ]
    elif own and own.get("source") == "input_tail":
        where = (
            f"from byte {own.get('offset', 'n/a')} on"
            if "file" not in own
            else f"its last {own['docs']} documents, from {Path(own['file']).name}"
        )
        lines += [
            f"*{own['dataset']} has no held-out file, so its own compression was measured on the "
            f"end of the training input ({where}, "
            f"{own['bytes']} bytes), which training saw: it overstates how well this tokenizer "
            "compresses unseen text of the kind. Nothing was held out (`dataset.heldout_fraction"
            "=0`, an input of one document, or a last document larger than "
            "`dataset.heldout_max_bytes`): pass `dataset.heldout_path=...`, or split the input "
            "into documents, to measure on unseen text.*",
            "",
        ]
    elif not own:
        lines += ["No held-out text of the training input was available to measure.", ""]
    if own and other and own.get("ratio") and other.get("ratio"):
        drop = 100 * (1 - other["ratio"] / own["ratio"])
        lines.append(
            "On its own domain this tokenizer packs "
            f"{fmt(own['ratio'], '.2f')} bytes per token; "
            f"on {other['dataset']} {fmt(other['ratio'], '.2f')} "
            f"({fmt(abs(drop), '.0f')}% {'less' if drop >= 0 else 'more'})."
        )
    if own and own.get("gpt2_ratio"):
        rel = own["ratio"] / own["gpt2_ratio"]
        lines.append(
            f"GPT-2's 50,257-token vocab gets {fmt(own['gpt2_ratio'], '.2f')} bytes per token "
            f"on the same documents: ours reaches {fmt(100 * rel, '.0f')}% of that."
        )
    lines.append("")
    return lines + _parent_lines(metrics) + _tiktoken_lines(metrics)


def section_bits_per_byte(metrics: dict) -> list[str]:
    """Bits per byte of the held-out text under an n-gram model of the run's ids."""
    lines = ["## Bits per byte (an n-gram model of the ids)", ""]
    bpb = schema.get(metrics, schema.BITS_PER_BYTE_SECTION)
    if not bpb:
        why = (
            "its training file could not be read (train.log says why)"
            if schema.has(metrics, schema.BITS_PER_BYTE_SECTION)
            else "it predates the bits-per-byte measure"
        )
        return [*lines, f"Not measured for this run ({why}).", ""]
    model = bpb.get("model") or {}
    order = model.get("order")
    rows = []
    for side in ("own", "other"):
        b = bpb.get(side)
        if not b:
            continue
        spread = b.get("splits") or {}
        where = f"{b['dataset']} ({_origin(b, side)})"
        rows.append(
            [
                where,
                b["docs"],
                b["tokens"],
                fmt(b["bits_per_byte"], ".3f"),
                f"{fmt(spread.get('min'), '.3f')} to {fmt(spread.get('max'), '.3f')}",
                fmt(b["unigram_bits_per_byte"], ".3f"),
                fmt(b["bits_per_token"], ".2f"),
            ]
        )
    if not rows:
        return [*lines, "No held-out documents were measured.", ""]
    splits = f"over {model.get('splits')} splits"
    headers = [
        "held-out documents",
        "docs",
        "tokens",
        f"bits/byte ({order}-gram)",
        splits,
        "bits/byte (unigram)",
        "bits/token",
    ]
    train = model.get("train") or {}
    scope = "all" if train.get("whole_file") else f"the first {train.get('bytes')} bytes"
    lines += [
        table(rows, headers),
        "",
        f"An interpolated Kneser-Ney {order}-gram model of this tokenizer's ids, fitted on "
        f"{scope} of {train.get('file')} ({train.get('tokens')} tokens, discounts "
        f"{', '.join(fmt(d, '.2f') for d in model.get('discounts') or [])} from unigrams up), "
        "scores the held-out documents; the splits are the documents dealt round-robin into "
        "parts. Lower is better. Bits per byte, unlike loss per token, compare tokenizers "
        "with different vocabularies: a model of this tokenizer's ids would likely prefer the "
        "one with fewer bits per byte on the same text.",
        "",
    ]
    return lines


def _parent_lines(metrics: dict) -> list[str]:
    """The extended tokenizer against its parent on held-out text (continued runs only)."""
    held = (metrics.get("init_from") or {}).get("heldout")
    if not held:
        return []
    gain = 100 * (held["ratio"] / held["parent_ratio"] - 1) if held.get("parent_ratio") else None
    return [
        f"Against the tokenizer it continued from, on {held['docs']} {held['dataset']} held-out "
        f"documents: parent {fmt(held['parent_ratio'], '.3f')} bytes per token, extended "
        f"{fmt(held['ratio'], '.3f')} ({fmt(gain, '+.1f')}%); "
        f"{fmt(100 * held['new_token_share'], '.1f')}% of the extended tokenizer's tokens there "
        "are new ids.",
        "",
    ]


def section_throughput(metrics: dict) -> list[str]:
    lines = ["## Throughput", ""]
    tp = metrics.get("throughput")
    if not tp:
        return [*lines, "Throughput was not measured.", ""]
    rows = [["ours", *_throughput_cells(tp, "")]]
    if tp.get("gpt2_bytes_per_second"):
        rows.append(["GPT-2 (same encoder)", *_throughput_cells(tp, "gpt2_")])
    first, first_hours = tp.get("first_pass_bytes_per_second"), _pile_hours(tp, "", "first_pass_")
    warm_hours = _pile_hours(tp, "", "")
    if first:
        projection = (
            f"At the first-pass speed ({fmt(first / 1e6, '.2f')} MB/s on one core, starting "
            f"from an empty pretoken cache) tokenizing The Pile would take about "
            f"{fmt(first_hours, '.0f')} hours ({fmt((first_hours or 0) / 24, '.1f')} days). The "
            f"warm speed ({fmt(tp['bytes_per_second'] / 1e6, '.2f')} MB/s, every pretoken "
            f"already cached) gives about {fmt(warm_hours, '.0f')} hours: optimistic, since new "
            "text keeps bringing pretokens the cache has not seen."
        )
    else:  # runs from before first-pass throughput was recorded
        projection = (
            f"At {fmt(tp['bytes_per_second'] / 1e6, '.2f')} MB/s on one core (warm cache), "
            f"tokenizing The Pile would take about {fmt(warm_hours, '.0f')} hours "
            f"({fmt((warm_hours or 0) / 24, '.1f')} days)."
        )
    headers = [
        "tokenizer",
        "first pass MB/s",
        "warm MB/s",
        "Pile hours (first pass)",
        "Pile hours (warm)",
    ]
    measured_on = schema.get(metrics, schema.DATASET, default="this run's")
    caveat = (
        f"The speed was measured on {measured_on} held-out text with a vocab trained on it; "
        "The Pile's text is of other domains, whose longer and rarer words change the rate "
        "too, so read the hours as an order of magnitude."
    )
    return [
        *lines,
        table(rows, headers),
        "",
        "MB/s on one thread; The Pile is 825 GB.",
        "",
        f"{projection} {caveat}",
        "",
    ]


def _pile_hours(tp: dict, who: str, speed: str) -> float | None:
    """Hours for The Pile at `speed` ("" warm, "first_pass_") for `who` ("" ours, "gpt2_")."""
    hours = tp.get(f"{who}{speed}pile_hours")
    if hours is None and tp.get(f"{who}{speed}bytes_per_second"):
        hours = pile_projection(tp[f"{who}{speed}bytes_per_second"])["hours"]
    return hours


def _throughput_cells(tp: dict, who: str) -> list[str]:
    first = tp.get(f"{who}first_pass_bytes_per_second")
    return [
        fmt(first / 1e6 if first else None, ".2f"),
        fmt(tp[f"{who}bytes_per_second"] / 1e6, ".2f"),
        fmt(_pile_hours(tp, who, "first_pass_"), ".1f"),
        fmt(_pile_hours(tp, who, ""), ".1f"),
    ]


def _tiktoken_lines(metrics: dict) -> list[str]:
    """The tiktoken agreement sentence and a blank line, for runs that measured it."""
    return [_tiktoken_line(metrics["tiktoken"]), ""] if metrics.get("tiktoken") else []


def _tiktoken_line(tk: dict) -> str:
    """One sentence: does the tiktoken export (tokenizer.tiktoken) agree on held-out text?"""
    if tk.get("not_exported"):
        return f"No tokenizer.json or tiktoken export: {tk['not_exported']}."
    names = tk.get("heldout") or []
    where = ", ".join(names) or "held-out text"
    # runs without a held-out file are measured on their input's tail, seen in training
    kind = "measured" if any(n.endswith("(input tail)") for n in names) else "held-out"
    head = (
        f"The tiktoken export (`tokenizer.tiktoken`) encodes {tk.get('mismatches')} of "
        f"{tk.get('pretokens')} {kind} pretokens ({where}) differently from this tokenizer"
    )
    first = tk.get("first")
    if not first:
        return head + ": the ids are identical."
    return (
        f"{head} ({tk.get('unique_mismatches')} distinct; first {first['pretoken']!r}: "
        f"BPE {first['bpe']}, tiktoken {first['tiktoken']}); encode with `--backend python`."
    )


def _longest_judgement(longest: list[dict], metrics: dict) -> str:
    top = longest[0]
    text = top["text"].strip()
    kinds = metrics.get("token_kinds") or {}
    by_name = {kind.name: kind for kind in TOKEN_KINDS}
    # runs since long tokens are clipped record each token's kind (of its full bytes)
    top_kind = top.get("kind") or (
        token_kind(top["text"].encode("utf-8")) if "\ufffd" not in top["text"] else "partial_utf8"
    )
    if top_kind == "word" and not top["text"].startswith(" "):
        descr = "a word piece"
    else:
        descr = by_name[top_kind].one
    sense = _sense(top, top_kind, metrics)
    among = sum(1 for t in longest if (t.get("kind") or token_kind(t["text"].encode())) == "word")
    parts = ", ".join(
        f"{fmt(100 * share, '.0f')}% {by_name[k].label}"
        for k, share in sorted(kinds.items(), key=lambda kv: -kv[1])
        if share > 0
    )
    return (
        f"The longest token is `{shown(top, 'gpt2')}` ({top['bytes']} bytes, "
        f"{shown({**top, 'text': text}, 'text', repr)}): "
        f"{descr}; {sense}. "
        f"{among} of the {len(longest)} longest tokens are letter-only words. "
        f"Across all {metrics.get('learned_tokens', 'n/a')} learned tokens: {parts}; "
        f"{fmt(100 * (metrics.get('leading_space_share') or 0), '.0f')}% start with a space."
    )


def _sense(top: dict, kind: str, metrics: dict) -> str:
    """What the longest token says about the corpus, read from its merge count: a token made
    from a pair seen at most `RARE_MERGE_COUNT` times is never called frequent.

    >>> _sense({"merge_count": 1, "text": "xy"}, "word", {})[:60]
    'its last merge joined a pair seen only once in training: a r'
    >>> _sense({"merge_count": 40, "text": " once upon a time"}, "mixed",
    ...        {"variant": {"name": "superbpe"}})[:50]
    'a superword (several words in one token, as SuperB'
    """
    count = top.get("merge_count")
    if count is not None and count <= RARE_MERGE_COUNT:
        times = "once" if count == 1 else f"{count} times"
        return (
            f"its last merge joined a pair seen only {times} in training: a rare string the "
            "vocab had room for, not a frequent unit of the corpus"
        )
    seen = "" if count is None else f", its last merge seen {count} times"
    variant = schema.get(metrics, schema.VARIANT_NAME, default=None)
    if variant == "superbpe" and len(top["text"].split()) > 1:
        return (
            "a superword (several words in one token, as SuperBPE's second stage makes them)" + seen
        )
    if kind in ("word", "number"):
        if count is None:  # runs from before longest tokens recorded their merge count
            return "how often it occurred was not recorded (an older run)"
        return f"a frequent unit of this corpus{seen}"
    return f"a recurring string of the corpus's layout or markup rather than a word{seen}"


def merge_support_sentence(metrics: dict) -> str | None:
    """Whether the corpus supports the vocab (metrics.json's `merge_support`), with the
    numbers and the remedy when it has outgrown it; None for runs that did not record it."""
    support = schema.get(metrics, schema.MERGE_SUPPORT, default=None)
    if not support or not support.get("merges"):
        return None
    said = (
        f"{support['rare']:,} of the {support['merges']:,} merges "
        f"({fmt(100 * support['rare_share'], '.1f')}%) joined a pair seen at most "
        f"{RARE_MERGE_COUNT} times in training ({support['count_1']:,} of them once); the "
        f"training text has {support['unique_pretokens']:,} distinct pretokens"
    )
    if not support.get("outgrown"):
        return f"The corpus supports this vocab: {said}."
    return (
        f"**This vocab has outgrown its corpus**: {said}, so many tokens are strings met once "
        f"or twice (a model would rarely see them). Every merge up to vocab size "
        f"{support['supported_vocab']:,} joined a pair seen more than {RARE_MERGE_COUNT} times: "
        f"train with `vocab_size={support['supported_vocab']}` or less, or on more text."
    )
