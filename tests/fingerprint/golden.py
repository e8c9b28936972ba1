"""Golden source for the fingerprint rule: every syntax 3.11 parses that the harness may use. Never
imported; tests/test_fingerprint_portable.py pins its serialization on every supported Python."""

from __future__ import annotations

import asyncio as aio
from dataclasses import dataclass, field
from typing import Any, Callable

from . import sibling
from .. import parent as p

COUNT: int = 0
NAMES: list[str] | None
TABLE = {"a": 1, **{"b": 2}}
BYTES, COMPLEX, BIG, TINY, NOTHING = b"\x00raw", 1 + 2j, 10**30, 1e-300, ...
TEXT = "é → × ≤ naïve \u2028 \t" "implicit" 'concat'
u_PREFIX = u"same as plain"


def fstrings(x: float, w: int, name: str) -> list[str]:
    return [
        f"{x}", f"{x!r}", f"{x!s:>10}", f"{x!a}", f"{x:}", f"{x:.{w}f}", f"{x:>{w}} tail",
        f"{x=}", f"{x = :.2f}", f"{{escaped}} {name}", f"{'nested ' + f'{x:{w}}'}",
        f"a" "b" f"{x}" "c", rf"\d{x}", f"{x if x else w:^{w + 1}}", f"{[i for i in range(w)]}",
    ]


@dataclass(frozen=True)
class Point:
    """A decorated class with fields, keywords and a metaclass-free base."""

    x: float
    y: float = 0.0
    tags: list[str] = field(default_factory=list)

    @property
    def norm(self) -> float:
        return (self.x**2 + self.y**2) ** 0.5

    @staticmethod
    def origin() -> Point:
        return Point(0.0)

    def __lt__(self, other: Point) -> bool:
        return (self.x, self.y) < (other.x, other.y)


class Meta(type):
    pass


class Tagged(Point, metaclass=Meta, extra=True):
    ...


def arguments(a, b=1, /, c=2, *args, d, e=3, **kwargs) -> Callable[..., Any]:
    first, *rest = args or (a, b)
    (x, y), z = (c, d), e
    g = lambda q, *r, s=1, **t: (q, r, s, t)
    return g(*rest, *args, s=x, **kwargs, **{"y": y, "z": z})


def matches(command: Any) -> str:
    match command:
        case None | True | False:
            return "singleton"
        case 0 | 1.5 | -2 | 3 + 4j | "s" | b"b":
            return "literal"
        case [first, *others] if others:
            return f"{first} and {len(others)}"
        case (a, b, _):
            return "triple"
        case {"key": value, **rest}:
            return f"{value}{rest}"
        case Point(x=0, y=yy) as pt:
            return f"{pt}{yy}"
        case Point(1, 2):
            return "positional"
        case aio.Event():
            return "dotted class"
        case str() | bytes() as text if (n := len(text)) > 3:
            return str(n)
        case _:
            return "other"


def scopes() -> Callable[[], int]:
    global COUNT
    COUNT += 1
    total = 0

    def inner() -> int:
        nonlocal total
        total += 1
        return total

    return inner


def comprehensions(rows: list[list[int]]) -> tuple:
    flat = [v for row in rows for v in row if v if v > 0]
    unique = {v % 3 for v in flat}
    index = {i: v for i, v in enumerate(flat)}
    lazy = (v * v for v in flat)
    if (n := len(flat)) > 10 and not (m := n // 2) or n in unique and n is not None:
        del index[0]
    return flat[1:-1:2], unique, index, sum(lazy), flat[::], m if n else -n, ~n, +n


async def asynchronous(urls: list[str]) -> list[str]:
    async with aio.timeout(1) as t, aio.Lock():
        got = [await aio.sleep(0, u) async for u in aiter_of(urls)]
    async for u in aiter_of(urls):
        await aio.sleep(0)
    return [g async for g in aiter_of(got) if await aio.sleep(0, True)]


async def aiter_of(xs):
    for x in xs:
        yield x


def generators(n: int):
    yield
    yield n
    received = yield from range(n)
    return received


def control(path: str) -> int:
    try:
        with open(path) as f, open(path) as g:
            pass
    except* (OSError, ValueError) as group:
        raise RuntimeError("wrapped") from group
    try:
        assert path, "empty"
    except AssertionError:
        raise
    else:
        pass
    finally:
        pass
    while True:
        break
    else:
        pass
    for i in range(3):
        continue
    x = y = 1
    x <<= y
    x @= y if False else x
    return 1 < x <= 2 != 3 is not None
