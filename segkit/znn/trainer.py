"""Training with the task-parallel engine: plain gradients, and SGD with momentum.

``gradients(model, x, y)`` is the one-call entry point (the same numbers as TensorFlow's
GradientTape on the same model, in model.trainable_weights order).  ``Trainer`` keeps a compiled
``Network`` and momentum buffers, steps on numpy copies of the weights and writes them back
into the Keras model when asked (and at the end of ``fit``).
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from ..validate import arguments
from .network import Network


def gradients(model, x, y, loss: str = "mse", threads: int | None = None,
              method: str = "auto") -> list[np.ndarray]:
    """Gradients of ``loss`` w.r.t. model.trainable_weights; threads=None uses every core."""
    _, grads = Network(model, method=method).gradients(x, y, loss=loss, threads=threads)
    return grads


class Trainer:
    """SGD with momentum on a Keras Conv3D model, each step one ZNN task graph."""

    def __init__(self, model, learning_rate: float = 0.01, momentum: float = 0.9,
                 loss: str = "mse", threads: int | None = None, method: str = "auto"):
        # (NaN and inf learning rates were taken: every weight became NaN)
        learning_rate, momentum = arguments(learning_rate=learning_rate, momentum=momentum)
        self.net = Network(model, method=method)
        self.lr, self.momentum, self.loss, self.threads = learning_rate, momentum, loss, threads
        self.slots = self.net.weight_slots()
        self.velocity = {slot: 0.0 for slot in self.slots}
        self.history: list[float] = []

    def step(self, x, y) -> float:
        loss, grads = self.net.gradients(x, y, loss=self.loss, threads=self.threads)
        updates = {}
        for slot, g in zip(self.slots, grads, strict=True):
            self.velocity[slot] = self.momentum * self.velocity[slot] + self.lr * g
            updates[slot] = self.velocity[slot]
        self.net.step_weights(updates)
        self.history.append(loss)
        return loss

    def fit(self, batches, steps: int | None = None, progress: bool = True) -> list[float]:
        """Train on an iterable of (x, y) pairs (or a callable step -> (x, y)) and push the
        weights into the Keras model; returns the loss per step."""
        if callable(batches):
            if steps is None:
                raise ValueError("steps is needed when batches is a function")
            source = (batches(i) for i in range(steps))
        else:
            source = iter(batches)
        bar = tqdm(source, total=steps, disable=not progress, desc="znn", unit="step")
        for i, (x, y) in enumerate(bar):
            loss = self.step(x, y)
            bar.set_postfix(loss=f"{loss:.4g}")
            if steps is not None and i + 1 >= steps:
                break
        self.net.push()
        return list(self.history)
