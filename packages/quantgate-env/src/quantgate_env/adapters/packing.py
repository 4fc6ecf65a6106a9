"""A pytree of arrays as one flat float64 vector: how the Gymnasium adapters talk to their compiled calls.

A compiled call made from Python pays per array it takes and returns (~3-10 us each on CPU, far more
than the arithmetic of one step at batch 1; bench/env_throughput.py prints the floor), so the Gymnasium
adapters pass their parameters and receive each step's results as one float64 vector apiece. Packing is
exact, so it changes no number: float32 and float64 embed in float64, complex leaves as their real and
imaginary parts, integers (int32 indices, uint32 PRNG keys; all below 2^53) and bools as their values.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["FlatLayout"]


@dataclasses.dataclass(frozen=True)
class FlatLayout:
    """Where each leaf of a pytree sits in one float64 vector (static: shapes and dtypes only).

    Attributes:
        treedef: the pytree structure.
        shapes: shape of each leaf, in leaf order.
        dtypes: numpy dtype of each leaf.
    """

    treedef: Any
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]

    @classmethod
    def of(cls, tree) -> FlatLayout:
        """The layout of ``tree`` (arrays or ``jax.ShapeDtypeStruct``; e.g. from ``jax.eval_shape``)."""
        leaves, treedef = jax.tree.flatten(tree)
        return cls(treedef, tuple(tuple(x.shape) for x in leaves), tuple(np.dtype(x.dtype) for x in leaves))

    @property
    def _spans(self) -> list[tuple[int, int]]:
        """(start, stop) of each leaf in the vector; a complex leaf takes twice its size (re, then im)."""
        spans, start = [], 0
        for shape, dtype in zip(self.shapes, self.dtypes):
            stop = start + math.prod(shape) * (2 if dtype.kind == "c" else 1)
            spans.append((start, stop))
            start = stop
        return spans

    @property
    def size(self) -> int:
        """Length of the packed vector."""
        return self._spans[-1][1] if self.shapes else 0

    def pack(self, tree) -> jnp.ndarray:
        """(size,) float64 vector holding ``tree``'s leaves (traceable; needs x64)."""
        parts = []
        for leaf in jax.tree.leaves(tree):
            leaf = jnp.ravel(leaf)
            if jnp.iscomplexobj(leaf):
                parts += [jnp.real(leaf).astype(jnp.float64), jnp.imag(leaf).astype(jnp.float64)]
            else:
                parts.append(leaf.astype(jnp.float64))
        return jnp.concatenate(parts)

    def unpack(self, flat: jnp.ndarray):
        """The pytree ``pack`` made ``flat`` from, leaves in their own dtypes (traceable)."""
        leaves = []
        for (start, stop), shape, dtype in zip(self._spans, self.shapes, self.dtypes):
            if dtype.kind == "c":
                half = (start + stop) // 2
                real = np.finfo(dtype).dtype  # float64 for complex128, float32 for complex64
                leaf = jax.lax.complex(flat[start:half].astype(real), flat[half:stop].astype(real))
            else:
                leaf = flat[start:stop].astype(dtype)
            leaves.append(jnp.reshape(leaf, shape))
        return jax.tree.unflatten(self.treedef, leaves)

    def host_unpacker(self):
        """A host-side ``unpack`` for layouts without complex leaves: numpy in, numpy leaves out.

        Precomputes the slices once, so each call costs one small copy per leaf (the adapters run
        it after every step).
        """
        if any(dtype.kind == "c" for dtype in self.dtypes):
            raise ValueError("host_unpacker: the layout has complex leaves; unpack them inside jit")
        cuts = [(slice(start, stop), shape, dtype) for (start, stop), shape, dtype in zip(self._spans, self.shapes, self.dtypes)]
        treedef = self.treedef

        def unpack(flat: np.ndarray):
            return jax.tree.unflatten(treedef, [flat[cut].reshape(shape).astype(dtype) for cut, shape, dtype in cuts])

        return unpack
