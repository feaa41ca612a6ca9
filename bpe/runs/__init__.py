"""The run directory's contract: what a run writes and what its readers may rely on.

    liveness   who is writing a run, and whether that process still exists (`crashed`)

The writer (`bpe.experiment`) and every reader (`bpe.analysis`, the CLIs) go through this
package; it imports nothing above `bpe.util`.
"""
