"""``python -m sanlab.targets.sessions.lab_keeper LAB TARGET PHASE``: the process that holds one half of a
lab target's recipe (see lab_targets.py).  Not for people: ``sanlab lab export`` starts it."""

from __future__ import annotations

import sys

from sanlab.targets.sessions.lab_targets import PHASES, keep

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[3] not in PHASES:
        sys.exit(f"usage: python -m sanlab.targets.sessions.lab_keeper LAB TARGET {{{','.join(PHASES)}}}")
    sys.exit(keep(*sys.argv[1:4]))
