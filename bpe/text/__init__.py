"""Text rules: what the tokenizer and stage 1 agree on, with no file, process or corpus.

    patterns     the named split patterns (gpt2, cl100k, o200k, SuperBPE's stage two), resolving
                 a name or a custom regex, checking that a pattern tiles text
    specials     special tokens: the one validity rule, the longest-first regex, splitting on them
    pretokens    the pretokens of ordinary text (a `re` translation of the pattern when exact)
    cuts         where a text may be cut so that no pretoken spans the cut (proved per pattern)

Everything here is pure: it reads no file and starts no process, so `import bpe.tokenizer` (and
an encode worker) loads this package and nothing of stage 1's corpus readers, pool or Dask.
Each name has one home: import it from its module (`bpe.text.specials.EOT`).
"""
