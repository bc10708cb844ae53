"""A small deep Q-network in numpy (LoopTune trains APEX-DQN/PPO with RLlib; that stack and
stable-baselines3 do not install beside TensorFlow 2.21 without torch or pinned gym, so this is
the textbook DQN, compact): an MLP obs -> one Q-value per action, trained from a replay buffer
with a target network and the double-DQN target, Huber loss, Adam.

    q = QNet.load()            # the shipped policy (policy.npz beside this module)
    q(obs)                     # Q-values of the ACTIONS for one observation
    train(tasks, minutes=10)   # see compilerkit/tune/train.py for the command
"""

from __future__ import annotations

import os
import time

import numpy as np

POLICY = os.path.join(os.path.dirname(__file__), "policy.npz")


class QNet:
    """Two ReLU hidden layers; weights in a dict of arrays (saved as .npz)."""

    def __init__(self, n_in: int, n_out: int, hidden: int = 64, seed: int = 0):
        rng = np.random.default_rng(seed)
        sizes = [n_in, hidden, hidden, n_out]
        self.w = {}
        for k in range(3):
            self.w[f"W{k}"] = (rng.standard_normal((sizes[k], sizes[k + 1]))
                               * np.sqrt(2.0 / sizes[k])).astype(np.float64)
            self.w[f"b{k}"] = np.zeros(sizes[k + 1])
        self.adam = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in self.w.items()}
        self.t = 0

    def forward(self, x):
        x = np.asarray(x, np.float64).reshape(len(x), -1)
        h1 = np.maximum(0, x @ self.w["W0"] + self.w["b0"])
        h2 = np.maximum(0, h1 @ self.w["W1"] + self.w["b1"])
        return h2 @ self.w["W2"] + self.w["b2"], (x, h1, h2)

    def __call__(self, obs):
        return self.forward(np.asarray(obs)[None])[0][0]

    def copy(self) -> QNet:
        other = QNet.__new__(QNet)
        other.w = {k: v.copy() for k, v in self.w.items()}
        return other

    def update(self, x, actions, targets, lr: float = 1e-3) -> float:
        """One Adam step on the Huber loss of Q(x, actions) against targets."""
        q, (x, h1, h2) = self.forward(x)
        idx = np.arange(len(actions))
        err = q[idx, actions] - targets
        dq = np.zeros_like(q)
        dq[idx, actions] = np.clip(err, -1, 1) / len(actions)
        grads = {"W2": h2.T @ dq, "b2": dq.sum(0)}
        d2 = (dq @ self.w["W2"].T) * (h2 > 0)
        grads.update({"W1": h1.T @ d2, "b1": d2.sum(0)})
        d1 = (d2 @ self.w["W1"].T) * (h1 > 0)
        grads.update({"W0": x.T @ d1, "b0": d1.sum(0)})
        self.t += 1
        for k, g in grads.items():
            m, v = self.adam[k]
            m[:] = 0.9 * m + 0.1 * g
            v[:] = 0.999 * v + 0.001 * g * g
            mh, vh = m / (1 - 0.9 ** self.t), v / (1 - 0.999 ** self.t)
            self.w[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
        return float(np.mean(np.minimum(np.abs(err), 1) ** 2))

    def save(self, path: str = POLICY, **meta) -> None:
        np.savez_compressed(path, **{k: v.astype(np.float32) for k, v in self.w.items()},
                            **{f"meta_{k}": np.asarray(v)
                                               for k, v in meta.items()})

    @classmethod
    def load(cls, path: str = POLICY) -> QNet:
        if not os.path.exists(path):
            raise FileNotFoundError(f"no trained policy at {path}: run "
                                    "`python -m compilerkit.tune.train`")
        with np.load(path) as f:
            q = cls.__new__(cls)
            q.w = {k: f[k].astype(np.float64) for k in f.files if not k.startswith("meta_")}
            q.meta = {k[5:]: f[k].tolist() for k in f.files if k.startswith("meta_")}
        return q


def train(env, minutes: float = 10.0, episodes: int = 100000, gamma: float = 0.9,
          batch: int = 64, seed: int = 0, progress: bool = True) -> tuple[QNet, list]:
    """DQN on `env` (a LoopTuneEnv) for at most `minutes` or `episodes`; returns the network
    and the per-episode (best GFLOP/s / start GFLOP/s) curve."""
    from tqdm.auto import tqdm

    rng = np.random.default_rng(seed)
    n_in = int(np.prod(env.observation_space.shape))
    n_act = env.action_space.n
    q = QNet(n_in, n_act, seed=seed)
    target = q.copy()
    buf_x, buf_a, buf_r, buf_x2, buf_done = [], [], [], [], []
    curve, steps = [], 0
    t0 = time.perf_counter()
    bar = tqdm(total=episodes, desc="DQN episodes", disable=not progress)
    for _ in range(episodes):
        if time.perf_counter() - t0 > 60 * minutes:
            break
        # Explore for the first half of the time, then mostly follow the network.
        eps = max(0.1, 1.0 - (time.perf_counter() - t0) / (30 * minutes))
        obs, info = env.reset(seed=int(rng.integers(1 << 31)))
        best, done = info["gflops"], False
        visited = {env.state()}
        while not done:
            a = int(rng.integers(n_act)) if rng.random() < eps else \
                env.unvisited_best(q(obs), visited)
            obs2, r, term, trunc, info = env.step(a)
            done = term or trunc
            for buf, v in ((buf_x, obs.ravel()), (buf_a, a), (buf_r, r), (buf_x2, obs2.ravel()),
                           (buf_done, float(term))):
                buf.append(v)
            obs, best = obs2, max(best, info["gflops"])
            visited.add(env.state())
            steps += 1
            if len(buf_a) >= batch:
                for _ in range(2):
                    idx = rng.integers(len(buf_a), size=batch)
                    x2 = np.array([buf_x2[i] for i in idx])
                    a2 = np.argmax(q.forward(x2)[0], axis=1)  # double DQN
                    q2 = target.forward(x2)[0][np.arange(batch), a2]
                    y = np.array([buf_r[i] for i in idx]) + gamma * q2 * (
                        1 - np.array([buf_done[i] for i in idx]))
                    q.update(np.array([buf_x[i] for i in idx]), np.array([buf_a[i] for i in idx]),
                             y)
            if steps % 200 == 0:
                target = q.copy()
            if len(buf_a) > 20000:
                del buf_x[0], buf_a[0], buf_r[0], buf_x2[0], buf_done[0]
        curve.append(best / env.base)
        bar.update(1)
        bar.set_postfix(speedup=f"{np.mean(curve[-20:]):.2f}", eps=f"{eps:.2f}")
    bar.close()
    return q, curve
