"""Child-process target for `profiler=scalene`: train, then pickle the TrainResult.

Run as `scalene run -o OUT.json scalene_target.py --- SPEC.json`, where SPEC.json holds the
keyword arguments of `train_bpe_detailed` plus `result_path`. Not meant to be run by hand.
"""

from __future__ import annotations

import json
import pickle
import sys

from bpe.training import train_bpe_detailed


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    result_path = spec.pop("result_path")
    result = train_bpe_detailed(
        spec["input_path"],
        spec["vocab_size"],
        spec["special_tokens"],
        trainer=spec["trainer"],
        num_workers=spec["num_workers"],
    )
    with open(result_path, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
