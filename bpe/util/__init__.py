"""Shared plumbing every layer may use: atomic file writes and project paths (`io`), progress
lines and bars (`progress`).

What it does not hold: anything about BPE. Modules here import nothing else from `bpe`.
"""
