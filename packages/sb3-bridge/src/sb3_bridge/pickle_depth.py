"""How deeply the objects of a pickle nest, found from its opcodes without building anything.

Why: CPython hashes a tuple by recursing into its items with no depth guard, so a 200 KB pickle
whose dict key is a tuple nested 200 000 times crashes the interpreter (a C stack overflow, not an
exception) while it is being unpickled, before ``find_class`` or any check of ours sees it. A torch
state_dict nests about 8 levels (dict -> tensor -> rebuild arguments -> storage id), so the reader
refuses anything deeper than ``MAX_PICKLE_DEPTH`` before unpickling.
"""

from __future__ import annotations

import pickletools

__all__ = ["pickle_depth", "MAX_PICKLE_DEPTH"]

#: Deepest nesting accepted in ``policy.pth``'s ``data.pkl`` (a torch state_dict needs about 8).
MAX_PICKLE_DEPTH = 64

# Opcodes that add items to the container below them and leave it on the stack.
_IN_PLACE = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"})
_MEMO_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_MEMO_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})


def pickle_depth(data: bytes, stop_above: int = MAX_PICKLE_DEPTH) -> int:
    """Nesting depth of the deepest object the pickle ``data`` would build.

    Simulates the unpickler's stack with one number per object (0 for a scalar or an empty
    container, 1 + the deepest item for a container), using the stack effects ``pickletools``
    documents for every opcode.

    Args:
        data: the pickle bytes.
        stop_above: return as soon as the depth exceeds this (a hostile file need not be scanned
            to its end).

    Returns:
        the depth (> ``stop_above`` means: too deep, stopped early).

    Raises:
        ValueError: an opcode ``pickletools`` cannot decode (the unpickler would fail too).
    """
    stack: list[int] = []
    marks: list[int] = []
    memo: dict = {}
    deepest = 0
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name == "MARK":
            marks.append(len(stack))
        elif name in _MEMO_PUT:
            memo[arg] = stack[-1] if stack else 0
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else 0
        elif name in _MEMO_GET:
            stack.append(memo.get(arg, 0))
        elif name == "DUP":
            stack.append(stack[-1] if stack else 0)
        else:
            popped: list[int] = []
            before = op.stack_before
            if pickletools.markobject in before:
                start = marks.pop() if marks else 0
                popped = stack[start:][::-1]
                del stack[start:]
                below = before.index(pickletools.markobject)  # e.g. the list under APPENDS' mark
            else:
                below = len(before)
            for _ in range(min(below, len(stack))):
                popped.append(stack.pop())
            if not op.stack_after:
                continue
            if name in _IN_PLACE and popped:
                # The container is the deepest-down item popped; it grows, it is not wrapped.
                depth = max(popped[-1], 1 + max(popped[:-1], default=-1))
            else:
                depth = 1 + max(popped, default=-1)
            deepest = max(deepest, depth)
            if deepest > stop_above:
                return deepest
            stack.extend([depth] * len(op.stack_after))
    return deepest
