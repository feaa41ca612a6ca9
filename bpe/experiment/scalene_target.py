"""Child-process target for `profiler=scalene`: train, then pickle the TrainResult.

Run as `scalene run -o OUT.json scalene_target.py --- PLAN.pickle`, where PLAN.pickle holds the
run's checked `RunPlan` (`plan`) and `result_path`. Not meant to be run by hand.
Log records go to stderr as `CHILD_LOG_PREFIX level logger: message` lines (and progress bars,
when asked), which the parent forwards to its own log as they come.
"""

from __future__ import annotations

import logging
import pickle
import sys

from bpe.pipeline import train_planned

#: Marks a log line on the child's stderr (anything else there is progress or scalene output).
CHILD_LOG_PREFIX = "bpe-child-log"


def main(spec_path: str) -> None:
    with open(spec_path, "rb") as f:
        spec = pickle.load(f)
    result_path = spec["result_path"]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{CHILD_LOG_PREFIX} %(levelno)d %(name)s: %(message)s"))
    pkg = logging.getLogger("bpe")
    pkg.addHandler(handler)
    pkg.setLevel(logging.INFO)
    # the plan the parent checked, trained as it is
    result = train_planned(spec["plan"])
    with open(result_path, "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1])
