"""ANALYSIS.md's sections about the tokenizer: its longest tokens, compression, bits per
byte, throughput and the tiktoken check, each a pure function of metrics.json's content.

What it does not do: read files (`bpe.analysis.run.facts`) or describe the run
(`bpe.analysis.run.sections`).
"""

from __future__ import annotations

import logging
from functools import partial
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


def longest_token_phrase(metrics: dict) -> str | None:
    """The run's longest token as the summary names it (None: no tokens recorded).

    >>> longest_token_phrase({"longest_tokens": [{"bytes": 4, "text": " the"}]})
    "' the' (4 bytes)"
    """
    longest = schema.get(metrics, schema.LONGEST_TOKENS) or []
    return next((f"{shown(t, 'text', repr)} ({t['bytes']} bytes)" for t in longest), None)


def section_longest_tokens(metrics: dict, figures_made: frozenset[str]) -> list[str]:
    lines = ["## Longest tokens", ""]
    longest = schema.get(metrics, schema.LONGEST_TOKENS) or []
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


def _own_side_lines(metrics: dict) -> list[str]:
    """Where the own side's documents came from, when the input had no held-out file."""
    get = partial(schema.get, metrics)
    own = get(schema.COMPRESSION_OWN)
    if not own:
        return ["No held-out text of the training input was available to measure.", ""]
    if get(schema.OWN_SOURCE) != "input_tail":
        found = get(schema.OWN_DOCS_IN_TRAINING, default=0) or 0
        if not get(schema.OWN_SEEN_IN_TRAINING, default=False) or not found:
            return []
        scanned = get(schema.OWN_TRAINING_SCANNED, default="all")
        searched = (
            "" if scanned == "all" else f" (in its first {fmt(scanned / 1e6, '.0f')}M characters)"
        )
        return [
            f"*{found} of the held-out file's measured documents also occur in the training "
            f"input{searched}, the same file or the same documents in another form: the "
            "compression below is not of unseen text. Point `dataset.heldout_path` at "
            "documents training did not read.*",
            "",
        ]
    dataset = get(schema.COMPRESSION_DATASET, side="own")
    docs = get(schema.COMPRESSION_DOCS, side="own")
    file = get(schema.HELDOUT_FILE)
    if not get(schema.OWN_SEEN_IN_TRAINING, default=True):
        return [
            f"*{dataset} has no held-out file; {_held_out(own)}. {docs} of them "
            f"were measured here (from {Path(file).name}). `dataset.heldout_fraction` "
            "and `dataset.heldout_max_bytes` set how many are held out; "
            "`dataset.heldout_path=...` names held-out text instead.*",
            "",
        ]
    where = (
        f"from byte {get(schema.HELDOUT_OFFSET, default='n/a')} on"
        if file is None
        else f"its last {docs} documents, from {Path(file).name}"
    )
    return [
        f"*{dataset} has no held-out file, so its own compression was measured on the "
        f"end of the training input ({where}, "
        f"{get(schema.COMPRESSION_BYTES, side='own')} bytes), which training "
        "saw: it overstates how well this tokenizer compresses unseen text of the kind. Nothing "
        "was held out (`dataset.heldout_fraction=0`, an input of one document, or a last "
        "document larger than `dataset.heldout_max_bytes`): pass `dataset.heldout_path=...`, "
        "or split the input into documents, to measure on unseen text.*",
        "",
    ]


def section_compression(metrics: dict) -> list[str]:
    get = partial(schema.get, metrics)
    lines = ["## Compression", ""]
    rows = []
    # "other" is the run's cross-domain dataset (the key metrics.json stores it under)
    for side in ("own", "other"):
        c = get(schema.COMPRESSION_OF, side=side)
        if not c:
            continue
        ratio = get(schema.COMPRESSION_RATIO_OF, side=side)
        base = get(schema.COMPRESSION_GPT2_RATIO_OF, side=side)
        dataset = get(schema.COMPRESSION_DATASET, side=side)
        rows.append(
            [
                f"{dataset} ({_origin(c, side)})",
                get(schema.COMPRESSION_DOCS, side=side),
                get(schema.COMPRESSION_BYTES, side=side),
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
    lines += _own_side_lines(metrics)
    own = get(schema.COMPRESSION_RATIO)
    other = get(schema.OTHER_COMPRESSION_RATIO)
    if own and other:
        drop = 100 * (1 - other / own)
        lines.append(
            "On its own domain this tokenizer packs "
            f"{fmt(own, '.2f')} bytes per token; "
            f"on {get(schema.OTHER_DATASET)} {fmt(other, '.2f')} "
            f"({fmt(abs(drop), '.0f')}% {'less' if drop >= 0 else 'more'})."
        )
    gpt2 = get(schema.GPT2_COMPRESSION_RATIO)
    if own and gpt2:
        lines.append(
            f"GPT-2's 50,257-token vocab gets {fmt(gpt2, '.2f')} bytes per token "
            f"on the same documents: ours reaches {fmt(100 * own / gpt2, '.0f')}% of that."
        )
    lines.append("")
    return lines + _parent_lines(metrics) + _tiktoken_lines(metrics)


def section_bits_per_byte(metrics: dict) -> list[str]:
    """Bits per byte of the held-out text under an n-gram model of the run's ids."""
    get = partial(schema.get, metrics)
    lines = ["## Bits per byte (an n-gram model of the ids)", ""]
    bpb = get(schema.BITS_PER_BYTE_SECTION)
    if not bpb:
        why = (
            "its training file could not be read (train.log says why)"
            if schema.has(metrics, schema.BITS_PER_BYTE_SECTION)
            else "it predates the bits-per-byte measure"
        )
        return [*lines, f"Not measured for this run ({why}).", ""]
    order = get(schema.BPB_ORDER)
    rows = []
    for side in ("own", "other"):
        b = get(schema.BITS_PER_BYTE_OF, side=side)
        if not b:
            continue
        value = partial(schema.get, metrics, side=side)

        rows.append(
            [
                f"{get(schema.BPB_DATASET, side=side)} ({_origin(b, side)})",
                get(schema.BPB_DOCS, side=side),
                get(schema.BPB_TOKENS, side=side),
                fmt(value(schema.BPB_BITS_PER_BYTE), ".3f"),
                f"{fmt(value(schema.BPB_SPLITS_MIN), '.3f')} to "
                f"{fmt(value(schema.BPB_SPLITS_MAX), '.3f')}",
                fmt(value(schema.BPB_UNIGRAM), ".3f"),
                fmt(value(schema.BPB_BITS_PER_TOKEN), ".2f"),
            ]
        )
    if not rows:
        return [*lines, "No held-out documents were measured.", ""]
    splits = f"over {get(schema.BITS_PER_BYTE_MODEL_SPLITS)} splits"
    headers = [
        "held-out documents",
        "docs",
        "tokens",
        f"bits/byte ({order}-gram)",
        splits,
        "bits/byte (unigram)",
        "bits/token",
    ]
    scope = (
        "all"
        if get(schema.BITS_PER_BYTE_MODEL_TRAIN_WHOLE_FILE)
        else f"the first {get(schema.BITS_PER_BYTE_MODEL_TRAIN_BYTES)} bytes"
    )
    lines += [
        table(rows, headers),
        "",
        f"An interpolated Kneser-Ney {order}-gram model of this tokenizer's ids, fitted on "
        f"{scope} of {get(schema.BITS_PER_BYTE_MODEL_TRAIN_FILE)} "
        f"({get(schema.BITS_PER_BYTE_MODEL_TRAIN_TOKENS)} tokens, discounts "
        f"{', '.join(fmt(d, '.2f') for d in get(schema.BITS_PER_BYTE_MODEL_DISCOUNTS) or [])} "
        "from unigrams up), "
        "scores the held-out documents; the splits are the documents dealt round-robin into "
        "parts. Lower is better. Bits per byte, unlike loss per token, compare tokenizers "
        "with different vocabularies: a model of this tokenizer's ids would likely prefer the "
        "one with fewer bits per byte on the same text.",
        "",
    ]
    return lines


def _parent_lines(metrics: dict) -> list[str]:
    """The extended tokenizer against its parent on held-out text (continued runs only)."""
    get = partial(schema.get, metrics)
    held = get(schema.INIT_FROM_HELDOUT)
    if not held:
        return []
    gain = (
        100 * (get(schema.INIT_FROM_HELDOUT_RATIO) / get(schema.INIT_FROM_HELDOUT_PARENT_RATIO) - 1)
        if get(schema.INIT_FROM_HELDOUT_PARENT_RATIO)
        else None
    )
    return [
        f"Against the tokenizer it continued from, on {get(schema.INIT_FROM_HELDOUT_DOCS)} "
        f"{get(schema.INIT_FROM_HELDOUT_DATASET)} held-out "
        f"documents: parent {fmt(get(schema.INIT_FROM_HELDOUT_PARENT_RATIO), '.3f')} bytes per "
        "token, extended "
        f"{fmt(get(schema.INIT_FROM_HELDOUT_RATIO), '.3f')} ({fmt(gain, '+.1f')}%); "
        f"{fmt(100 * get(schema.INIT_FROM_HELDOUT_NEW_TOKEN_SHARE), '.1f')}% of the extended "
        "tokenizer's tokens there "
        "are new ids.",
        "",
    ]


def section_throughput(metrics: dict) -> list[str]:
    get = partial(schema.get, metrics)
    lines = ["## Throughput", ""]
    tp = get(schema.THROUGHPUT)
    if not tp:
        return [*lines, "Throughput was not measured.", ""]
    rows = [["ours", *_throughput_cells(tp, "")]]
    if get(schema.THROUGHPUT_GPT2_BYTES_PER_SECOND):
        rows.append(["GPT-2 (same encoder)", *_throughput_cells(tp, "gpt2_")])
    first, first_hours = (
        get(schema.THROUGHPUT_FIRST_PASS_BYTES_PER_SECOND),
        _pile_hours(tp, "", "first_pass_"),
    )
    warm_hours = _pile_hours(tp, "", "")
    if first:
        projection = (
            f"At the first-pass speed ({fmt(first / 1e6, '.2f')} MB/s on one core, starting "
            f"from an empty pretoken cache) tokenizing The Pile would take about "
            f"{fmt(first_hours, '.0f')} hours ({fmt((first_hours or 0) / 24, '.1f')} days). The "
            f"warm speed ({fmt(get(schema.BYTES_PER_SECOND) / 1e6, '.2f')} MB/s, every pretoken "
            f"already cached) gives about {fmt(warm_hours, '.0f')} hours: optimistic, since new "
            "text keeps bringing pretokens the cache has not seen."
        )
    else:  # runs from before first-pass throughput was recorded
        projection = (
            f"At {fmt(get(schema.BYTES_PER_SECOND) / 1e6, '.2f')} MB/s on one core (warm cache), "
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
    measured_on = get(schema.DATASET, default="this run's")
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
    get = partial(schema.get, metrics)
    return [_tiktoken_line(get(schema.TIKTOKEN)), ""] if get(schema.TIKTOKEN) else []


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
    get = partial(schema.get, metrics)
    top = longest[0]
    text = top["text"].strip()
    kinds = get(schema.TOKEN_KINDS) or {}
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
        f"Across all {get(schema.LEARNED_TOKENS, default='n/a')} learned tokens: {parts}; "
        f"{fmt(100 * (get(schema.LEADING_SPACE_SHARE) or 0), '.0f')}% start with a space."
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
    get = partial(schema.get, metrics)
    support = get(schema.MERGE_SUPPORT, default=None)
    if not support or not get(schema.MERGE_SUPPORT_MERGES):
        return None
    said = (
        f"{get(schema.MERGE_SUPPORT_RARE):,} of the {get(schema.MERGE_SUPPORT_MERGES):,} merges "
        f"({fmt(100 * get(schema.MERGE_SUPPORT_RARE_SHARE), '.1f')}%) joined a pair seen at most "
        f"{RARE_MERGE_COUNT} times in training ({get(schema.MERGE_SUPPORT_COUNT_1):,} of them "
        "once); the "
        f"training text has {get(schema.MERGE_SUPPORT_UNIQUE_PRETOKENS):,} distinct pretokens"
    )
    if not get(schema.MERGE_SUPPORT_OUTGROWN):
        return f"The corpus supports this vocab: {said}."
    return (
        f"**This vocab has outgrown its corpus**: {said}, so many tokens are strings met once "
        f"or twice (a model would rarely see them). Every merge up to vocab size "
        f"{get(schema.MERGE_SUPPORT_SUPPORTED_VOCAB):,} joined a pair seen more than "
        f"{RARE_MERGE_COUNT} times: "
        f"train with `vocab_size={get(schema.MERGE_SUPPORT_SUPPORTED_VOCAB)}` or less, or on more "
        "text."
    )
