"""The shapes the policy trains on and the held-out ones it is judged on.

Training: matmuls with sizes drawn log-uniformly (`training_shapes`; a few odd sizes, so
tiles have tails) and Conv layers as im2col matrix products (3x3 and 1x1, ResNet-like channel
counts), from a fixed seed. Test shapes are never in the training set (`training_shapes`
skips them), and include sizes past the training range.
"""

from __future__ import annotations

import numpy as np

TEST_SHAPES = ((384, 640, 512), (1024, 256, 768), (200, 300, 700), (768, 768, 768),
               (96, 1000, 400), (512, 1024, 256))
SMOKE_TEST_SHAPES = ((160, 224, 192), (256, 128, 320))
TRAIN_CONVS = ((16, 32, 28, 3), (32, 32, 28, 3), (64, 64, 14, 3), (32, 128, 28, 1),
               (64, 16, 28, 1))


def training_shapes(n: int = 24, seed: int = 0) -> list:
    """M log-uniform in [64, 1024], N and K in [192, 1024] (B's K x N panel larger than L2
    holds for most: where schedules matter), at most 2^28 multiply-adds (cheap to measure)."""
    rng = np.random.default_rng(seed)
    out = []

    def draw(lo, hi):
        return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi)))))

    while len(out) < n:
        m, nn, k = draw(64, 1024), draw(192, 1024), draw(192, 1024)
        if rng.random() < 0.7:  # mostly multiples of 16, as layers are
            m, nn, k = (max(16, v // 16 * 16) for v in (m, nn, k))
        shape = (m, nn, k)
        if m * nn * k > 1 << 28:
            continue
        if shape not in TEST_SHAPES and shape not in SMOKE_TEST_SHAPES and shape not in out:
            out.append(shape)
    return out


def training_tasks(n: int = 24, seed: int = 0, convs: bool = True) -> list:
    from compilerkit.tune.nest import Task

    tasks = [Task.matmul(*s) for s in training_shapes(n, seed)]
    if convs:
        tasks += [Task.conv(*c) for c in TRAIN_CONVS]
    return tasks
