"""The corpus layer: a path, folder, glob, list or Hub dataset as typed files, parts, documents.

What it does:
    * `resolve_source` turns what a user names (`dataset.path`, `bpe-encode --input`, the
      `input_path` of `train_bpe`) into a `Corpus`: an ordered tuple of `InputFile`s, each with
      its format and compression, plus the reader settings (the text field or column). A file,
      a directory (its corpus files, recursively, in sorted order; a `save_to_disk` directory of
      the `datasets` library as its Arrow files), a glob (`shards/*.parquet`), a list of any of
      these, `hf:owner/name/pattern` (parquet or other files of a Hub dataset repository,
      fetched once into the Hub cache), or `hf-stream:owner/name[:config[:split]][@revision]`
      (a Hub dataset read record by record with `datasets` in streaming mode, pinned to the
      commit it resolved to; one part, read sequentially) are accepted;
    * formats (`bpe.corpus.formats.FORMATS`, one module each): `text` (UTF-8, documents separated
      by a special token such as `<|endoftext|>`), `jsonl` (one JSON object per line, its text in
      `text_field`), `parquet` (a string column `text_field`), `arrow` (Arrow IPC files as
      `datasets` saves them); text and JSON lines may be compressed (`.gz`, `.zst`, `.xz`, `.bz2`).
      `format="auto"` decides by suffix, then by the file's first bytes (compression and parquet
      magic, else UTF-8 text), and names the file when neither tells;
    * `plan_parts` splits a corpus into `Part`s that workers read independently: byte ranges
      of plain text (cut where no pretoken can span, `bpe.corpus.chunks`), byte ranges of
      plain JSON lines (cut after a newline), runs of parquet row groups, and whole files for
      compressed streams and Arrow files (read sequentially, in parallel across files);
    * `read_part` yields what a part holds, as `Piece`s: text to split on special tokens
      (a plain text range, or a bounded block of a decompressed stream cut at a safe place),
      or one document (a record). Memory stays bounded by a block (about `max_chunk_bytes`) or a
      batch of records: a 1 GB shard is never held whole.

The corpus contract: a record is one document; a text file is a stream in which the special
tokens separate documents; pretokens never cross a document or a file. So the shards of a
corpus count exactly as one text file holding the same documents joined by `<|endoftext|>`
(tested for every format and trainer). Bytes are kept as stored: no normalisation, and invalid
UTF-8 is an error naming the file and the byte offset, line or row.

What it does not do: count pretokens (`bpe.pretokenize`), hash files for lineage (the
caller does, through `corpus_manifest`), or download anything but the files a `hf:` source
names (an `hf-stream:` source is streamed by `datasets`, its files never stored whole).
pyarrow and zstandard are imported only when a parquet/Arrow or `.zst` file is read (the
`corpora` extra installs them; `datasets` too, for `hf-stream:`); a missing one is an error
naming `pip install 'bpe-lab[corpora]'`.


Modules:

    files          InputFile, Corpus, Stop, Part, Piece: what a corpus is
    sources        resolve_source: what a user names, as files with their formats
    listing        the files a folder or glob names: each real file once, skips said
    hub            hf: and hf-stream: sources, every network step with a deadline
    compression    compressed streams and strict UTF-8 decoding, errors with offsets
    chunks         a plain text file cut where no pretoken can span
    formats        one module per format behind `Format`, registered in `FORMATS`
    parts          plan_parts, plan_work (the workers, once), read_part
    documents      every document, the first ones, the last ones, the held-out tail
    manifest       a corpus's identity (every file's sha256)
    datasets       the named datasets of `bpe/conf/dataset`

Each name has one home: import it from its module (`bpe.corpus.sources.resolve_source`).
"""
