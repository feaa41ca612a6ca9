"""The inputs of parity-aware BPE: each language's training counts and development counts.

A parity-aware run trains on a corpus of one or more files per language, each named
`<language>.<anything>` (`eng_Latn.dev.gz`, `deu.txt`): the language is the file name up to
its first dot. Its development text (`variant.dev`) is parallel text, the same sentences in
each language: a folder named the same way, or (None) the first half of the bundled FLORES-200
devtest (`bpe.measures.languages.parity_dev_text`), which leaves devtest's second half for the
held-out measures of every run.

    >>> language_of("data/flores200/dev/eng_Latn.dev.gz")
    'eng_Latn'

What it does: group the corpus's files by language, count each language's pretokens (through
the pretoken cache, like stage 1), count the development text's, check that the languages'
counts add up to the whole corpus's (so the hybrid's global merges are plain BPE's on it),
and build the `bpe.variants.parity.ParityCorpus`. What it does not do: merge
(`bpe.variants.parity`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bpe.corpus.files import Corpus
from bpe.corpus.flores import DEVTEST_RULE_LINES, LANGUAGES, parity_dev_text
from bpe.corpus.sources import resolve_source
from bpe.pretokenize import count_stage_one
from bpe.pretokenize.counting import PretokenCounts, count_pretokens
from bpe.text.protect import protect_regex, split_counts
from bpe.util.cputime import cpu_seconds
from bpe.util.stats import gini
from bpe.variants.base import Member, RunContext, Variant
from bpe.variants.parity import ParityCorpus, variant_loop

logger = logging.getLogger(__name__)

#: How metrics.json names the default development text.
FLORES_DEV = f"FLORES-200 devtest, lines 1-{DEVTEST_RULE_LINES}"


def language_of(path: str | os.PathLike) -> str:
    """A corpus file's language: its name up to the first dot."""
    return Path(path).name.split(".", 1)[0]


def by_language(corpus: Corpus) -> dict[str, Corpus]:
    """The corpus's files grouped by language, in the order each language first appears.

    Raises:
        ValueError: fewer than two languages (names the files and how to name them).
    """
    groups = _grouped(corpus)
    if len(groups) < 2:
        names = [Path(f.path).name for f in corpus.files][:5]
        raise ValueError(
            f"variant=parity needs training text in at least 2 languages, one or more files "
            f"each named <language>.<anything>; {corpus.source!r} holds {names}: point "
            "dataset.path at a folder such as data/flores200/dev (dataset=flores_dev)"
        )
    return groups


def _grouped(corpus: Corpus) -> dict[str, Corpus]:
    groups: dict[str, list] = {}
    for f in corpus.files:
        groups.setdefault(language_of(f.path), []).append(f)
    return {
        lang: dataclasses.replace(corpus, files=tuple(files), source=f"{corpus.source}:{lang}")
        for lang, files in groups.items()
    }


def dev_counts(
    languages: Sequence[str],
    dev: str | None,
    specials: Sequence[str],
    *,
    pattern: str,
    protect: str | None = None,
) -> list[Mapping[bytes, int]]:
    """Each language's development pretoken counts: of `dev` (a folder of files named by
    language) or, with None, of FLORES-200 devtest's first half; split by `protect` as
    training's are.

    Raises:
        ValueError: a language without development text (names it, and what has some).
    """
    if dev is None:
        missing = [lang for lang in languages if lang not in LANGUAGES]
        if missing:
            raise ValueError(
                f"variant.dev=null takes the development text from FLORES-200, which has no "
                f"{missing}; name the training files by FLORES-200 code ({list(LANGUAGES)}) "
                "or set variant.dev to a folder with one parallel file per language"
            )
        rx = protect_regex(protect)
        return [
            split_counts(count_pretokens(parity_dev_text(lang), specials, pattern=pattern), rx)
            for lang in languages
        ]
    parts = _grouped(resolve_source(dev))
    missing = [lang for lang in languages if lang not in parts]
    if missing:
        raise ValueError(
            f"variant.dev={dev!r} has no file for {missing} (it has {list(parts)}); add "
            "<language>.<anything> files holding the same sentences as the others"
        )
    return [
        count_stage_one(
            parts[lang], list(specials), pattern=pattern, cache_dir=None, protect=protect
        )[0].counts
        for lang in languages
    ]


def parity_corpus(
    corpus: Corpus,
    whole: Mapping[bytes, int],
    specials: Sequence[str],
    *,
    pattern: str,
    dev: str | None,
    global_merges: int,
    cache_dir: str | os.PathLike | None,
    stage_one_options: dict,
) -> tuple[ParityCorpus, dict]:
    """The `ParityCorpus` of a corpus whose counts as a whole are `whole`, and what building
    it measured (languages, seconds, the development text's name).

    Raises:
        ValueError: fewer than two languages, a language without development text, or
            languages whose counts do not add up to `whole`.
    """
    t0, cpu = time.perf_counter(), cpu_seconds()
    parts = by_language(corpus)
    train = {
        lang: count_stage_one(
            part, list(specials), pattern=pattern, cache_dir=cache_dir, **stage_one_options
        )[0].counts
        for lang, part in parts.items()
    }
    languages = tuple(train)
    built = ParityCorpus(
        languages,
        tuple(train.values()),
        tuple(
            dev_counts(
                languages, dev, specials, pattern=pattern, protect=stage_one_options.get("protect")
            )
        ),
        global_merges=global_merges,
    )
    if built.summed() != {p: n for p, n in whole.items() if n}:
        raise ValueError(
            f"the languages' pretoken counts do not add up to the corpus's ({corpus.source!r}): "
            "a pretoken spans two files; end each file with a newline"
        )
    seconds = time.perf_counter() - t0
    logger.info(
        "parity-aware BPE: %d languages (%s), development text %s, %d global merges first; "
        "counted in %.3f s",
        len(languages),
        ", ".join(languages),
        dev or FLORES_DEV,
        global_merges,
        seconds,
    )
    facts = {
        "languages": list(languages),
        "dev_text": dev or FLORES_DEV,
        "count_seconds": seconds,
        "count_cpu_seconds": cpu_seconds() - cpu,
    }
    return built, facts


def parity_facts(corpus: ParityCorpus, facts: dict) -> dict:
    """metrics.json's `variant` facts of a parity-aware run, once its loop has run: the
    languages, the development text, how many merges served each language, and each
    development text's tokens before the first merge and after the last, with their Gini
    coefficient (what the rule drives down).

    >>> from bpe.variants.parity import ParityRecord
    >>> c = ParityCorpus(("a", "b"), ({b"x": 1},) * 2, ({b"x": 1},) * 2,
    ...                  record=ParityRecord([1], [4, 2], [2, 2]))
    >>> f = parity_facts(c, {"languages": ["a", "b"]})
    >>> f["merges_per_language"], f["dev_gini_before"], f["dev_gini_after"]
    ({'global': 0, 'a': 0, 'b': 1}, 0.1667, 0.0)
    """
    record, langs = corpus.record, corpus.languages
    return {
        **facts,
        "count_seconds": round(facts.get("count_seconds", 0.0), 6),
        "merges_per_language": record.merges_per_language(langs),
        "dev_tokens_before": dict(zip(langs, record.dev_tokens_before, strict=True)),
        "dev_tokens_after": dict(zip(langs, record.dev_tokens_after, strict=True)),
        "dev_gini_before": round(gini(record.dev_tokens_before), 4),
        "dev_gini_after": round(gini(record.dev_tokens_after), 4),
    }


def _prepare(
    variant: Variant, context: RunContext, counted: PretokenCounts
) -> tuple[ParityCorpus, dict]:
    """Each language's counts and development counts, timed with stage 1."""
    built = parity_corpus(
        context.corpus,
        counted.counts,
        context.specials,
        pattern=context.pattern,
        dev=variant.dev,
        global_merges=variant.global_merges or 0,
        cache_dir=context.cache_dir,
        stage_one_options=context.stage_one_options,
    )
    context.timings.add("pretokenize", built[1]["count_seconds"], built[1].pop("count_cpu_seconds"))
    return built


#: Parity-aware BPE in a training run: counts per language first, its loops, its record.
MEMBER = Member(
    "parity",
    prepare=_prepare,
    loop=lambda variant, prepared: variant_loop(prepared[0]),
    after=lambda variant, context, output, counted, prepared: (
        output,
        parity_facts(*prepared),
        context.pattern,
    ),
)
