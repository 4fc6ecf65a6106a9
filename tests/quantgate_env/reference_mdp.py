"""An independent, slow reference of the paper's MDP (spec 3), written for the tests.

Plain numpy, a dense 27x27 ``scipy.linalg.expm`` per sample, a Python loop, weylchamber for the
Weyl coordinates. It shares no code with quantgate_env.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from . import reference_model as ref

OBS_IDX_1 = (1, 3, 9)
OBS_IDX_2 = (2, 4, 6, 10, 12, 18)


class ReferenceMDP:
    def __init__(self, pulse_length=1000, T=50.0, K=3, a_scale=20.0, log_lim=1e-2, tv=1e-3,
                 oob_mode="terminate", oob_penalty=1.0, device=ref.NOMINAL):
        self.L, self.T, self.K, self.a_scale = pulse_length, T, K, a_scale
        self.dt = T / pulse_length
        self.offset = -math.log10(1 - log_lim)
        self.tv, self.oob_mode, self.oob_penalty = tv, oob_mode, oob_penalty
        self.drift, self.control = ref.hamiltonians(device)

    def reset(self):
        self.u = np.eye(27, dtype=complex)
        self.idx = 0
        self.amps = np.zeros(self.K)
        return self._obs(self.idx)

    def _obs(self, idx):
        psi01, psi10, psi11 = self.u[:, 3], self.u[:, 9], self.u[:, 12]
        z = np.concatenate([psi01[list(OBS_IDX_1)], psi10[list(OBS_IDX_1)], psi11[list(OBS_IDX_2)]])
        feats = []
        for amp in z:
            feats += [2 * abs(amp) - 1, np.angle(amp) / np.pi]
        feats += list(self.amps / self.a_scale)
        feats.append(2 * idx / self.L - 1)
        return 0.9 * np.array(feats)

    def step(self, action):
        action = np.clip(np.asarray(action, float), -1, 1)
        prev = 0.0 if self.idx == 0 else self.amps[-1]
        requested = prev + np.cumsum(action * self.a_scale)
        excess = np.sum(np.maximum(np.abs(requested) / self.a_scale - 1, 0))
        oob = np.max(np.abs(requested / self.a_scale)) > 1
        self.amps = np.clip(requested, -self.a_scale, self.a_scale)
        for amp in self.amps:
            self.u = scipy.linalg.expm(-1j * (self.drift + amp * self.control) * self.dt) @ self.u
        jt, conc, unit = ref.pe_metrics(ref.realised_gate(self.u))
        tv = self.tv * np.sum(np.abs(np.diff(self.amps)))
        reward = -math.log10(max(jt, 1e-12)) - self.offset - tv
        truncated = False
        if self.oob_mode == "terminate" and oob:
            reward, truncated = -20.0 * (1 - self.idx / self.L), True
        elif self.oob_mode == "clip":
            reward -= self.oob_penalty * excess
        start = self.idx
        self.idx += self.K
        terminated = self.idx + self.K - 1 >= self.L
        info = dict(JT=jt, concurrence=conc, unitarity=unit, t=self.idx * self.dt, amps=self.amps.copy())
        return self._obs(start), reward, terminated, truncated, info
