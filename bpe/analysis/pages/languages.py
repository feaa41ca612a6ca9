"""reports/languages.md: plain BPE against parity-aware BPE on FLORES-200, from one real sweep.

What it does: `gather_languages` reads a sweep's complete runs (normally `bpe-train -m
experiment=languages`: plain and parity-aware BPE on `dataset=flores_dev` at several vocab
sizes) into `LangRun`s: each run's premiums per language on devtest's held-out half (text that
neither training nor the parity rule read), their Gini coefficient, the max and min premium,
bytes per token over all languages, and for parity-aware runs whom the merges served and the
development text's Gini after training; GPT-2's measure on the same text comes from the runs'
`gpt2` side. `render_languages` writes the Markdown (a pure function of the runs), with the
papers' claims beside what our rows show; `write_languages` writes the file.
`bpe-report --page languages` runs the sweep and calls it.

What it does not do: train or measure (the runs' metrics.json hold every number).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bpe.analysis.loader import find_run_dirs, read_run
from bpe.analysis.markdown import fmt, generated_by, table
from bpe.measures import RARE_MERGE_COUNT
from bpe.runs import schema
from bpe.util.io import atomic_write_text

#: Where the report goes inside the reports directory.
REPORT_FILE = "languages.md"
#: The side of a run's languages measure that is GPT-2's.
GPT2 = "gpt2"


@dataclass(frozen=True)
class LangRun:
    """One tokenizer's costs on the held-out parallel text (GPT-2's: `variant` "gpt2")."""

    variant: str  # bpe | parity | gpt2
    vocab_size: int
    gini: float
    max_premium: float
    max_language: str
    min_premium: float
    min_language: str
    bytes_per_token: float
    premiums: dict[str, float] = field(default_factory=dict)
    #: parity-aware runs: merges per language served (most first), the development Gini after
    served: tuple[tuple[str, int], ...] = ()
    dev_gini_after: float | None = None
    #: the share of merges whose pair occurred at most `RARE_MERGE_COUNT` times in the text
    #: it was chosen on (the served language's, for a parity-aware merge)
    rare_share: float | None = None


def _side(metrics: dict, who: str, variant: str, vocab_size: int) -> LangRun | None:
    """One side (ours or GPT-2's) of a run's held-out languages measure, or None."""
    get = partial(schema.get, metrics, who=who)
    if get(schema.LANG_HELDOUT_GINI) is None:
        return None
    n = len(get(schema.LANG_HELDOUT_ROWS, default=[]))
    served = get(schema.PARITY_MERGES_PER_LANGUAGE, default={}) if who == "ours" else {}
    return LangRun(
        variant=variant,
        vocab_size=vocab_size,
        gini=get(schema.LANG_HELDOUT_GINI),
        max_premium=get(schema.LANG_HELDOUT_MAX_PREMIUM),
        max_language=get(schema.LANG_HELDOUT_MAX_LANGUAGE),
        min_premium=get(schema.LANG_HELDOUT_MIN_PREMIUM),
        min_language=get(schema.LANG_HELDOUT_MIN_LANGUAGE),
        bytes_per_token=get(schema.LANG_HELDOUT_BYTES_PER_TOKEN),
        premiums={
            get(schema.LANG_HELDOUT_ROW_LANGUAGE, i=i): get(schema.LANG_HELDOUT_ROW_PREMIUM, i=i)
            for i in range(n)
        },
        served=tuple(sorted(((k, v) for k, v in served.items() if v), key=lambda kv: -kv[1])),
        dev_gini_after=get(schema.PARITY_DEV_GINI_AFTER) if who == "ours" else None,
        rare_share=get(schema.MERGE_SUPPORT_RARE_SHARE) if who == "ours" else None,
    )


def gather_languages(sweep_dir: Path) -> list[LangRun]:
    """Every complete run of the sweep (its held-out side), and GPT-2's once (vocab 50,257)."""
    runs: list[LangRun] = []
    gpt2: LangRun | None = None
    for run_dir in find_run_dirs(sweep_dir):
        metrics = read_run(run_dir)["metrics"]
        if schema.get(metrics, schema.STATUS) != "complete":
            continue
        variant = schema.get(metrics, schema.VARIANT_NAME)
        ours = _side(metrics, "ours", variant, schema.get(metrics, schema.VOCAB_SIZE))
        if ours is not None:
            runs.append(ours)
        gpt2 = gpt2 or _side(metrics, GPT2, GPT2, 50257)
    return runs + ([gpt2] if gpt2 is not None else [])


def _label(run: LangRun) -> str:
    return {"bpe": "plain BPE", "parity": "parity-aware BPE", GPT2: "GPT-2 (reference)"}.get(
        run.variant, run.variant
    )


def render_languages(
    runs: Sequence[LangRun], *, command: str, source: str, code: str | None = None
) -> str:
    """The Markdown of reports/languages.md."""
    ours = sorted((r for r in runs if r.variant != GPT2), key=lambda r: (r.vocab_size, r.variant))
    gpt2 = next((r for r in runs if r.variant == GPT2), None)
    lines = [
        "# Languages: plain BPE and parity-aware BPE on FLORES-200",
        "",
        f"{generated_by(command, code)} from the sweep `{source}` (`bpe-train -m "
        "experiment=languages`"
        ": the heap trainer on `dataset=flores_dev`, 12 languages of FLORES-200 `dev`, the same "
        "997 sentences in each). Parity-aware BPE (Foroutan et al., 2025) serves, before each "
        "merge, the language whose development text (FLORES-200 `devtest` lines 1-506) takes "
        "the most tokens. Every number below is measured on `devtest` lines 507-1012, joined by "
        "a space as Petrov et al. (2023) join lines: text that neither training nor the parity "
        "rule read. A premium is a language's tokens over English's with the same tokenizer; "
        "the Gini coefficient is that of the 12 token counts (0: every language costs the "
        "same); bytes per token is over all languages together (higher compresses more).",
        "",
        "## Summary",
        "",
        table(
            [
                [
                    fmt(r.vocab_size, ","),
                    _label(r),
                    fmt(r.gini, ".3f"),
                    f"{fmt(r.max_premium, '.2f')} (`{r.max_language}`)",
                    f"{fmt(r.min_premium, '.2f')} (`{r.min_language}`)",
                    fmt(r.bytes_per_token, ".3f"),
                    fmt(r.dev_gini_after, ".3f"),
                    fmt(None if r.rare_share is None else 100 * r.rare_share, ".1f"),
                ]
                for r in [*ours, *([gpt2] if gpt2 else [])]
            ],
            [
                "vocab",
                "tokenizer",
                "Gini",
                "max premium",
                "min premium",
                "bytes/token",
                "dev Gini",
                "rare merges %",
            ],
        ),
        "",
        "`dev Gini`: the development text's Gini after training (parity-aware runs only): "
        "what the rule drove down, on text it looked at. `rare merges %`: the share of merges "
        f"whose pair occurred at most {RARE_MERGE_COUNT} times in the text it was chosen on "
        "(a parity-aware merge is chosen on the served language's training text alone: "
        "997 sentences here, so a language served for long runs out of frequent pairs).",
        "",
        *_premium_lines(ours, gpt2),
        *_served_lines(ours),
        *_claims(ours, gpt2),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _premium_lines(ours: Sequence[LangRun], gpt2: LangRun | None) -> list[str]:
    """Each language's premium under every tokenizer."""
    sides = [*([gpt2] if gpt2 else []), *ours]
    languages = list(next((r.premiums for r in sides if r.premiums), {}))
    body = [[f"`{lang}`", *(fmt(r.premiums.get(lang), ".2f") for r in sides)] for lang in languages]
    heads = ["language", *(f"{_label(r)}, {r.vocab_size:,}" for r in sides)]
    return ["## Premiums per language", "", table(body, heads), ""]


def _served_lines(ours: Sequence[LangRun]) -> list[str]:
    """Whom the parity-aware merges served (the five languages served most)."""
    rows = [
        [fmt(r.vocab_size, ","), ", ".join(f"`{k}` {v:,}" for k, v in r.served[:5])]
        for r in ours
        if r.variant == "parity"
    ]
    if not rows:
        return []
    return [
        "## Whom the parity-aware merges served",
        "",
        table(rows, ["vocab", "merges per language (the five served most)"]),
        "",
    ]


def _claims(ours: Sequence[LangRun], gpt2: LangRun | None) -> list[str]:
    """Each paper's claim, and what our rows show at each vocab size."""
    pairs = _pairs(ours)
    gini = "; ".join(f"{v:,}: {fmt(a.gini, '.3f')} -> {fmt(b.gini, '.3f')}" for v, a, b in pairs)
    rate = "; ".join(
        f"{v:,}: {100 * (b.bytes_per_token / a.bytes_per_token - 1):+.1f}%" for v, a, b in pairs
    )
    top = "; ".join(
        f"{v:,}: {fmt(a.max_premium, '.2f')} -> {fmt(b.max_premium, '.2f')}" for v, a, b in pairs
    )
    rows = [
        [
            "Foroutan et al. (2025): parity-aware BPE leads to more equitable token counts "
            "across languages",
            f"Gini, plain -> parity-aware, by vocab: {gini or 'n/a'}; max premium {top or 'n/a'}",
        ],
        [
            "Foroutan et al. (2025): with negligible impact on the global compression rate",
            f"bytes/token, parity-aware against plain, by vocab: {rate or 'n/a'}",
        ],
        [
            "Petrov et al. (2023): the same text costs some languages many times the tokens "
            "of English (up to about 15x)",
            "GPT-2 on this held-out text: max premium "
            + (f"{fmt(gpt2.max_premium, '.2f')} (`{gpt2.max_language}`)" if gpt2 else "n/a"),
        ],
    ]
    return [
        "## What the papers claim, and what these rows show",
        "",
        "The claims paraphrase the papers' abstracts; ours compare plain and "
        "parity-aware BPE trained on the same text to the same vocab size.",
        "",
        table(rows, ["claim", "ours"]),
        "",
    ]


def _pairs(ours: Sequence[LangRun]) -> list[tuple[int, LangRun, LangRun]]:
    """(vocab, plain, parity-aware) for every vocab size that has both."""
    by = {(r.vocab_size, r.variant): r for r in ours}
    return [
        (v, by[(v, "bpe")], by[(v, "parity")])
        for v in sorted({r.vocab_size for r in ours})
        if (v, "bpe") in by and (v, "parity") in by
    ]


def write_languages(
    sweep_dir: Path, out_dir: Path, *, command: str, code: str | None = None
) -> Path:
    """Write `<out_dir>/languages.md` from the sweep's runs, and beside it `languages.json`:
    the rows it was rendered from (`render_from_json` renders the same Markdown again, which
    a test holds the published report to)."""
    runs = gather_languages(Path(sweep_dir))
    if not any(r.variant != GPT2 for r in runs):
        raise ValueError(
            f"{sweep_dir} holds no complete run with a held-out languages measure: run "
            "`bpe-train -m experiment=languages`"
        )
    out = Path(out_dir) / REPORT_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": command,
        "code": code,
        "source": Path(sweep_dir).name,
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    atomic_write_text(out.with_suffix(".json"), json.dumps(record, indent=1) + "\n")
    atomic_write_text(out, render_from_json(out.with_suffix(".json")))
    return out


def render_from_json(path: Path) -> str:
    """reports/languages.md rendered from the `languages.json` written beside it."""
    record = json.loads(Path(path).read_text("utf-8"))
    runs = [
        LangRun(**{**r, "served": tuple(tuple(kv) for kv in r["served"])}) for r in record["runs"]
    ]
    return render_languages(
        runs, command=record["command"], source=record["source"], code=record["code"]
    )
