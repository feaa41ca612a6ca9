"""The run directory's contract: what a run writes and what its readers may rely on.

    layout     every file and folder name in and around a run directory, once
    schema     the keys of metrics.json, once, and how to read them (`get`, `has`)
    settings   the defaults of the config sections readers fall back on
    stages     the run's stages, their names and their timing keys
    command    the command line that reruns a run
    liveness   who is writing a run, and whether that process still exists (`crashed`)

The writer (`bpe.experiment`) and every reader (`bpe.analysis`, the CLIs) go through this
package; it imports nothing above `bpe.util`.
"""
