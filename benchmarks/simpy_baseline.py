"""The reference the model's speed goal is measured against (issue 5).

A plain SimPy loop: 200,000 I/Os through two single-server stages, written
the way a SimPy tutorial would (Resource request, timeout, release).
``sanlab model scenarios/zeta-2016.yaml`` must finish faster than this.
"""

from __future__ import annotations

import random
import time

import simpy

IOS = 200_000


def run(ios: int = IOS, outstanding: int = 32, seed: int = 1) -> float:
    env = simpy.Environment()
    rng = random.Random(seed)
    stage_a = simpy.Resource(env, capacity=1)
    stage_b = simpy.Resource(env, capacity=1)
    done = [0]

    def job():
        while done[0] < ios:
            for stage, mean in ((stage_a, 1.0), (stage_b, 0.8)):
                with stage.request() as req:
                    yield req
                    yield env.timeout(rng.expovariate(1.0 / mean))
            done[0] += 1

    for _ in range(outstanding):
        env.process(job())
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


if __name__ == "__main__":
    print(f"plain SimPy, {IOS} I/Os through two stages: {run():.2f} s")
