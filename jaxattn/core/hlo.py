"""The kernels of a compiled loop, read from XLA's optimised HLO text.

After XLA's passes, each instruction of a computation that is not plumbing (a parameter, a
constant, a tuple and its elements, a bitcast) is one kernel the device runs: a fusion, a matrix
product, a copy, a library call. On a GPU each is a launch; a ``while`` adds its condition's
kernels on every trip. :func:`loop_kernels` counts them for one trip of the loop that runs a
function traced under :func:`jax.named_scope` (the engine's programs name their step loops so),
with the loops nested in it counted as many times as XLA knows they run.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

_PLUMBING = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all"})
_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^(?:ROOT )?%?[\w.\-]+ = .*? ([a-z][a-z0-9\-]*)\((.*)$")
_SCOPE = re.compile(r'op_name="([^"]*)"')


class LoopKernels(NamedTuple):
    """The kernels of one trip of a loop.

    Attributes:
        per_trip: Kernels run per trip: the body's, its condition's, and those of the loops in
            it times their trip counts (once each where XLA does not know it).
        by_opcode: ``per_trip`` by the instructions' opcodes (``fusion``, ``copy``, ``dot``...).
        inner_loops: The loops nested in the body, at any depth.
        unknown_trips: Those among them whose trip count XLA does not know (counted as one trip).
    """

    per_trip: int
    by_opcode: dict[str, int]
    inner_loops: int
    unknown_trips: int


def _computations(text: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in text.splitlines():
        if line and not line[0].isspace():
            m = _HEADER.match(line)
            lines = comps.setdefault(m.group(1), []) if m else None
        elif lines is not None and line.strip() and line.strip() != "}":
            lines.append(line.strip())
    return comps


def _called(line: str, attr: str) -> str:
    m = re.search(attr + r"=%?([\w.\-]+)", line)
    if m is None:
        raise ValueError(f"an instruction without its {attr}: {line[:200]}")
    return m.group(1)


def loop_kernels(text: str, scope: str) -> LoopKernels:
    """The kernels of one trip of the ``while`` loop whose body runs code traced under
    ``jax.named_scope(scope)`` (the one whose body holds most of that code, the loop itself
    outside the scope), in a compiled module's text.

    Args:
        text: An optimised HLO module (``jax.jit(f).lower(...).compile().as_text()``,
            :func:`jaxattn.engine.program_text`).
        scope: The name of the scope the loop body's code was traced in.

    Returns:
        The :class:`LoopKernels` of one trip.

    Raises:
        ValueError: If no loop runs code of ``scope``.
    """
    comps = _computations(text)
    tag = f"/{scope}/"

    def in_scope(line: str) -> bool:
        m = _SCOPE.search(line)
        return m is not None and tag in f"/{m.group(1)}/"

    count: Counter[str] = Counter()
    loops = [0, 0]

    def add(comp: str, times: int) -> None:
        for line in comps[comp]:
            m = _INSTRUCTION.match(line)
            if m is None:
                continue
            op = m.group(1)
            if op == "while":
                trips = re.search(r'known_trip_count"?[=:]\{"?n"?[=:]"?(\d+)', line)
                loops[0] += 1
                loops[1] += trips is None
                n = times * (int(trips.group(1)) if trips else 1)
                add(_called(line, "body"), n)
                add(_called(line, "condition"), n)
            elif op in ("call", "async-start"):
                add(_called(line, "to_apply" if op == "call" else "calls"), times)
            elif op == "conditional":
                count["conditional"] += times  # the branch taken varies; its kernels are not counted
            elif op not in _PLUMBING and op != "async-done":
                count[op] += times

    candidates = [
        line
        for comp in comps.values()
        for line in comp
        if (m := _INSTRUCTION.match(line)) and m.group(1) == "while" and not in_scope(line)
    ]
    scoped = {line: sum(map(in_scope, comps.get(_called(line, "body"), ()))) for line in candidates}
    if not scoped or max(scoped.values()) == 0:
        raise ValueError(f"no loop in this module runs code of the scope {scope!r}")
    # the loop whose body holds most of the scope's code (XLA may hoist some of it a loop out)
    loop = max(scoped, key=scoped.__getitem__)
    add(_called(loop, "body"), 1)
    add(_called(loop, "condition"), 1)
    return LoopKernels(sum(count.values()), dict(count), loops[0], loops[1])
