"""Save the booted snapshots the VM tier restores, while the unit tiers run (tests/bootstrap).

``sanlab images build`` saves one shape, a one-NIC guest's.  The VM tier's
labs also restore two-NIC guests (smoke, multipath) and incast's three-port
fabric VM: on a fresh machine each of those shapes was saved by the first
test that wanted it, a cold boot and a save (15-53 s each, the cache's
manifests of 2026-11-27) on the VM tier's own path, with the test's worker
waiting.  Saved here, in the background beside lint and the unit tests,
the VM tier finds them.  The shapes are the labs' own (their blueprints),
so a scenario that changes shape changes what is saved here.  A guest with no
cable (a one-host lab: ``tests/test_exact_identity.py``) is one more shape,
saved by the VM tier until 2026-11-27 (15 s on its path).

    python tests/warm_snapshots.py      # after `sanlab images build`; quick when all are saved
"""

from __future__ import annotations

import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from sanlab.emulator import accel, snapshots
from sanlab.emulator.blueprint import blueprint
from sanlab.emulator.images import build_image
from sanlab.emulator.qemu import qemu_binary
from sanlab.scenarios.loader import load_scenario

REPO = Path(__file__).resolve().parent.parent
# Scenarios whose labs the VM tier brings up, between them every shape it restores.
SCENARIOS = ("pair-rxe.yaml", "smoke.yaml", "incast.yaml")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # SIGTERM (tests/bootstrap ending early) unwinds like Ctrl-C: a template guest being
    # saved is stopped and its half-written folder removed (snapshots._save's own cleanup).
    signal.signal(signal.SIGTERM, _interrupt)
    image = build_image(print)  # built already: the cached one
    qemu = qemu_binary()
    kind = accel.choose(qemu, image, print)
    shapes = []
    with tempfile.TemporaryDirectory() as run_dir:
        for name in SCENARIOS:
            plan = blueprint(load_scenario(REPO / "scenarios" / name), "warm", Path(run_dir), None)
            shapes += [snapshots.shape_of(spec, kind) for spec in plan.specs.values()]
    cabled = next((s for s in shapes if s is not None), None)
    shapes += [replace(cabled, nics=0)] if cabled else []  # a one-host lab's guest
    for shape in dict.fromkeys(s for s in shapes if s is not None):  # once each, in order
        if snapshots.ready_snapshot(image, qemu, shape, print) is None:
            print(f"no snapshot for {shape.nics}-NIC guests: the VM tier boots them cold", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
