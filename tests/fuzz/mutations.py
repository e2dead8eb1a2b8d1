"""Seed packages and the mutations the fuzzers apply to them, at three levels:

* **bytes** — flip bits, truncate, insert random bytes, delete or duplicate a range;
* **zip structure** — drop / duplicate / rename / reorder members, swap or truncate their data,
  deflate them, lie about sizes and CRCs, mark them ZIP64, add junk members;
* **JSON values** — in any ``*.json`` member: set a value anywhere to a random JSON value or an
  edge number (NaN, ±Inf, 0, -1, 2**63...), delete a key or element, replace a value by another
  subtree of the same document (a tensor argument where an int was, a list of the wrong length),
  replace a name by another name (dangling references, cycles, duplicate definitions), duplicate
  or reverse a list (duplicate nodes, uses before definitions).

Every mutation draws its choices from a :class:`Chooser`, so the hypothesis test and the atheris
harness share one set of mutations: :class:`HypothesisChooser` wraps ``st.data()``,
``tests.fuzz.atheris_pt2`` wraps ``atheris.FuzzedDataProvider``. :func:`mutate` builds one
mutated package from a seed.
"""
from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any, Callable, Protocol

from tests.fixtures import PT2_DIR
from tests.fixtures import zipcraft as zc

ROOT = Path(__file__).resolve().parents[2]

#: valid packages to start from: every layout (pt2 archive, torch 2.8 archive, legacy flat zip),
#: both dialects, symbolic shapes, constants, a transformer block and the bundled CNN sample
SEEDS: dict[str, Path] = {
    "tiny": PT2_DIR / "tiny.pt2",
    "legacy_8_20": PT2_DIR / "legacy_8_20.pt2",
    "layout_2_8": PT2_DIR / "layout_2_8.pt2",
    "dynamic": PT2_DIR / "dynamic.pt2",
    "constants": PT2_DIR / "constants.pt2",
    "cnn_aten": PT2_DIR / "cnn_aten.pt2",
    "transformer_block": PT2_DIR / "transformer_block.pt2",
    "multi_model": PT2_DIR / "multi_model.pt2",
    "tiny_cnn_sample": ROOT / "resources" / "samples" / "tiny_cnn.pt2",
}

LEVELS = ("bytes", "zip", "json")


class Chooser(Protocol):
    """A source of choices (hypothesis data, an atheris FuzzedDataProvider...)."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]`` (both included)."""

    def raw(self, max_size: int) -> bytes:
        """Up to ``max_size`` bytes."""


class HypothesisChooser:
    """A :class:`Chooser` drawing from hypothesis' ``st.data()``."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self._data, self._st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self._data.draw(self._st.integers(lo, hi))

    def raw(self, max_size: int) -> bytes:
        return self._data.draw(self._st.binary(max_size=max_size))


def pick(ch: Chooser, seq):
    return seq[ch.integer(0, len(seq) - 1)]


# --------------------------------------------------------------------------- bytes
def _flip(ch: Chooser, b: bytearray) -> None:
    for _ in range(ch.integer(1, 8)):
        b[ch.integer(0, len(b) - 1)] ^= ch.integer(1, 255)


def _truncate(ch: Chooser, b: bytearray) -> None:
    del b[ch.integer(0, len(b) - 1):]


def _insert(ch: Chooser, b: bytearray) -> None:
    at = ch.integer(0, len(b))
    b[at:at] = ch.raw(64) or b"\x00"


def _delete(ch: Chooser, b: bytearray) -> None:
    at = ch.integer(0, len(b) - 1)
    del b[at:at + ch.integer(1, 256)]


def _duplicate(ch: Chooser, b: bytearray) -> None:
    src = ch.integer(0, len(b) - 1)
    chunk = bytes(b[src:src + ch.integer(1, 512)])
    at = ch.integer(0, len(b))
    b[at:at] = chunk


BYTE_MUTATIONS: list[Callable[[Chooser, bytearray], None]] = [_flip, _truncate, _insert, _delete, _duplicate]


def mutate_bytes(ch: Chooser, blob: bytes) -> bytes:
    b = bytearray(blob)
    pick(ch, BYTE_MUTATIONS)(ch, b)
    return bytes(b)


# --------------------------------------------------------------------------- zip structure
def _z_drop(ch, ms):
    del ms[ch.integer(0, len(ms) - 1)]


def _z_duplicate(ch, ms):
    ms.insert(ch.integer(0, len(ms)), pick(ch, ms))


def _z_rename(ch, ms):
    i = ch.integer(0, len(ms) - 1)
    if ch.integer(0, 1):
        other = pick(ch, ms).name
    else:
        other = ms[i].name + ch.raw(8).decode("latin-1")
    ms[i] = ms[i].with_(name=other)


def _z_reorder(ch, ms):
    i, j = ch.integer(0, len(ms) - 1), ch.integer(0, len(ms) - 1)
    ms[i], ms[j] = ms[j], ms[i]


def _z_swap_data(ch, ms):
    i, j = ch.integer(0, len(ms) - 1), ch.integer(0, len(ms) - 1)
    ms[i], ms[j] = ms[i].with_(data=ms[j].data), ms[j].with_(data=ms[i].data)


def _z_resize(ch, ms):
    i = ch.integer(0, len(ms) - 1)
    data = ms[i].data
    data = data[:ch.integer(0, len(data))] if ch.integer(0, 1) else data + ch.raw(64)
    ms[i] = ms[i].with_(data=data)


def _z_deflate(ch, ms):
    i = ch.integer(0, len(ms) - 1)
    ms[i] = ms[i].with_(method=zc.DEFLATED)


def _z_lie(ch, ms):
    i = ch.integer(0, len(ms) - 1)
    field = pick(ch, ["crc", "declared_size", "declared_csize"])
    value = pick(ch, [0, 1, len(ms[i].data) + 1, 0xFFFFFFFE, ch.integer(0, 0xFFFFFFFE)])
    ms[i] = ms[i].with_(**{field: value})


def _z_zip64(ch, ms):
    i = ch.integer(0, len(ms) - 1)
    ms[i] = ms[i].with_(zip64=True)


def _z_junk(ch, ms):
    prefix = ms[0].name.split("/", 1)[0] + "/" if "/" in ms[0].name else ""
    name = prefix + pick(ch, ["models/", "data/weights/", "extra/", "../", ""]) + ch.raw(12).decode("latin-1")
    ms.insert(ch.integer(0, len(ms)), zc.Member(name or "x", ch.raw(256), align=64))


ZIP_MUTATIONS: list[Callable] = [_z_drop, _z_duplicate, _z_rename, _z_reorder, _z_swap_data, _z_resize,
                                 _z_deflate, _z_lie, _z_zip64, _z_junk]


def mutate_zip(ch: Chooser, members: list[zc.Member]) -> list[zc.Member]:
    ms = list(members)
    pick(ch, ZIP_MUTATIONS)(ch, ms)
    return ms


# --------------------------------------------------------------------------- JSON values
EDGE_VALUES: list[Any] = [0, -1, 1, 2**31, -(2**31), 2**63, -(2**64), 10**30, 1e308, -1e-308,
                          math.nan, math.inf, -math.inf, 0.5, True, False, None, "", "x", [], {}, [0],
                          [-1, -1], [2**40, 2**40], {"as_int": -1}, {"as_none": True},
                          {"as_tensor": {"name": "nope"}}, {"as_ints": []}, {"as_float": math.nan},
                          {"as_string": "NaN"}, {"as_expr": {"expr_str": "s0", "hint": None}}]


def random_json(ch: Chooser, depth: int = 2) -> Any:
    kind = ch.integer(0, 7 if depth > 0 else 5)
    if kind == 0:
        return pick(ch, EDGE_VALUES)
    if kind == 1:
        return ch.integer(-(2**64), 2**64)
    if kind == 2:
        return ch.raw(8).decode("latin-1")
    if kind == 3:
        return None
    if kind == 4:
        return bool(ch.integer(0, 1))
    if kind == 5:
        return pick(ch, EDGE_VALUES)
    if kind == 6:
        return [random_json(ch, depth - 1) for _ in range(ch.integer(0, 3))]
    return {ch.raw(4).decode("latin-1"): random_json(ch, depth - 1) for _ in range(ch.integer(0, 2))}


def _places(doc) -> list[tuple[Any, Any]]:
    """Every (container, key) in ``doc``, without recursion."""
    out, stack = [], [doc]
    while stack:
        cur = stack.pop()
        items = cur.items() if isinstance(cur, dict) else enumerate(cur) if isinstance(cur, list) else ()
        for k, v in items:
            out.append((cur, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


def _j_set(ch, doc, places):
    c, k = pick(ch, places)
    c[k] = random_json(ch)


def _j_delete(ch, doc, places):
    c, k = pick(ch, places)
    del c[k]


def _j_transplant(ch, doc, places):
    c, k = pick(ch, places)
    c2, k2 = pick(ch, places)
    c[k] = json.loads(json.dumps(c2[k2]))


def _j_rename(ch, doc, places):
    strings = [(c, k) for c, k in places if isinstance(c[k], str)]
    if strings:
        c, k = pick(ch, strings)
        c2, k2 = pick(ch, strings)
        c[k] = c2[k2]


def _j_number(ch, doc, places):
    nums = [(c, k) for c, k in places if isinstance(c[k], (int, float)) and not isinstance(c[k], bool)]
    if nums:
        c, k = pick(ch, nums)
        c[k] = pick(ch, [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, math.nan, math.inf, -math.inf,
                         c[k] + 1, c[k] - 1, -c[k]])


def _j_list(ch, doc, places):
    lists = [(c, k) for c, k in places if isinstance(c[k], list) and c[k]]
    if lists:
        c, k = pick(ch, lists)
        lst = c[k]
        op = ch.integer(0, 2)
        if op == 0:
            lst.insert(ch.integer(0, len(lst)), json.loads(json.dumps(pick(ch, lst))))
        elif op == 1:
            lst.reverse()
        else:
            del lst[ch.integer(0, len(lst) - 1):]


JSON_MUTATIONS: list[Callable] = [_j_set, _j_delete, _j_transplant, _j_rename, _j_number, _j_list]


def mutate_json(ch: Chooser, doc: Any) -> Any:
    """Mutate ``doc`` in place (or return a replacement)."""
    places = _places(doc)
    if not places:
        return random_json(ch)
    pick(ch, JSON_MUTATIONS)(ch, doc, places)
    return doc


# --------------------------------------------------------------------------- whole packages
_member_cache: dict[str, list[zc.Member]] = {}


def seed_members(name: str) -> list[zc.Member]:
    if name not in _member_cache:
        with zipfile.ZipFile(SEEDS[name]) as zf:
            _member_cache[name] = [zc.Member(i.filename, zf.read(i.filename), align=64) for i in zf.infolist()]
    return list(_member_cache[name])


def _json_members(ms: list[zc.Member]) -> list[int]:
    return [i for i, m in enumerate(ms) if m.name.endswith(".json")]


def mutate(ch: Chooser, seed: str, levels: tuple[str, ...] = LEVELS, max_steps: int = 3) -> bytes:
    """A mutated copy of seed package ``seed``: 1..``max_steps`` mutations, each at one of
    ``levels``; JSON and zip mutations first, byte mutations on the finished zip."""
    ms = seed_members(seed)
    byte_steps = 0
    for _ in range(ch.integer(1, max_steps)):
        level = pick(ch, levels)
        if level == "json" and _json_members(ms):
            i = pick(ch, _json_members(ms))
            try:
                doc = json.loads(ms[i].data)
            except ValueError:  # an earlier zip mutation put other data there
                continue
            ms[i] = ms[i].with_(data=json.dumps(mutate_json(ch, doc)).encode())
        elif level == "zip" and ms:
            ms = mutate_zip(ch, ms)
        else:
            byte_steps += 1
    blob = zc.build(ms)
    for _ in range(byte_steps):
        if blob:
            blob = mutate_bytes(ch, blob)
    return blob


def members_of(blob: bytes) -> list[str]:
    """Member names of zip bytes (for messages), or ``[]`` when it is no longer a zip."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            return zf.namelist()
    except Exception:
        return []
