"""Exceptions raised by sb3-bridge.

Every error about a checkpoint names the file and, where it applies, the zip member (for tensors
inside ``policy.pth``: ``"policy.pth:archive/data/3"``), so a user with a folder of checkpoints
knows which one is broken and where.
"""

from __future__ import annotations

__all__ = ["CheckpointError", "UnsafeCheckpointError", "UnsupportedCheckpointError"]


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable, truncated or internally inconsistent.

    Attributes:
        path: the checkpoint file as given by the caller (``str``).
        member: the zip member the problem is in (``"data"``, ``"policy.pth"``,
            ``"policy.pth:archive/data.pkl"``, ...), or ``None`` for problems with the file itself.
        reason: the message without the file/member prefix.
    """

    def __init__(self, path, member: str | None, reason: str):
        self.path = str(path)
        self.member = member
        self.reason = reason
        where = self.path if member is None else f"{self.path}, member {member!r}"
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        # Default exception pickling would call __init__ with the formatted message only.
        return (type(self), (self.path, self.member, self.reason))


class UnsafeCheckpointError(CheckpointError):
    """A pickle in the checkpoint asks for a global outside the allow-list.

    Raised from ``find_class`` *before* anything is imported or looked up, so no code from the file
    runs.
    """


class UnsupportedCheckpointError(CheckpointError):
    """A well-formed checkpoint of a kind sb3-bridge does not convert.

    For example CNN or dict observations, gSDE, shared layers, SAC/DQN/..., recurrent or maskable
    policies. The message names what was found and what is supported.
    """
