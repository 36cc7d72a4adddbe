#!/usr/bin/env python3
"""Write the vectors of vectors.json that this script owns, from objects-spec
alone (the other entries of the file are older and left as they are):
- the canonical numbers of section 3: a blob holding a JSON array of numbers
  at the edges of the rules, and its canonical JSON, written here by
  `number()` (Python's own `repr` differs: `1e-05` for `0.00001`, `1e-07`
  for `1e-7`, and integers beyond 64 bits);
- `refused`: canonical bytes whose header is not canonical (section 2.1),
  which a reader MUST refuse as malformed although they hash to an id;
- `unknown_kind`: the longest header a reader reads (32 bytes before its
  NUL), naming a kind no reader knows: an unknown kind, not malformed;
- `repeated_keys`: payloads holding a key twice in one object (section 3),
  which a reader MUST refuse as malformed;
- the snapshots: "snapshot" (an `answer` of schema 3 without spill files,
  its `spill` `{}`), and "snapshot naming its spill map blob" with the
  blobs it names by `spill`: "spill map blob" and the "spill file blob"
  that map names.

Needs the `blake3` package (pip install blake3). Re-running replaces these
entries.
"""

import json
import math
import sys
from pathlib import Path

import blake3

NAME = "numbers: integers and floats at the edges of the rules"

# Each is (as Python holds it, what section 3 writes).
NUMBERS = [
    0, -1, 9007199254740993, 18446744073709551615, -9223372036854775808,
    # Outside both u64 and i64: a float.
    18446744073709551616, -9223372036854775809,
    0.0, -0.0, 1.0, 100.0, 0.1, 0.30000000000000004, 1.5, -2.25,
    1e15, 9007199254740993.0, 1234567890123456.7, 1e16, 1.5e16, 123456789012345680.0,
    1e21, 1.7976931348623157e308,
    0.0001, 1e-05, 2.5e-05, 0.000012345, 1e-06, 1e-07, 1.2345e-07, 5e-324,
    2.2250738585072014e-308,
]


def number(v):
    """Section 3's spelling of a JSON number held as `v`."""
    if isinstance(v, int) and -(2**63) <= v < 2**64:
        return str(v)
    x = float(v)
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    # The shortest digits that read back as x (repr's digits), as d × 10^k.
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    frac = frac.rstrip("0")
    digits = (whole + frac).lstrip("0")
    k = int(exp or 0) - len(frac)
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped
    n = len(digits)
    kk = n + k  # 10^(kk-1) <= |x| < 10^kk
    if 0 <= k and kk <= 16:
        text = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        text = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        text = "0." + "0" * -kk + digits
    else:
        e = kk - 1
        exponent = f"e+{e}" if e >= 0 else f"e-{-e}"
        text = digits[0] + ("." + digits[1:] if n > 1 else "") + exponent
    return sign + text


# (name, canonical bytes): each spells the text blob `hello` with a header
# that is not canonical.
REFUSED = [
    ("length with a leading zero", b"blob 05\0hello"),
    ("length with a sign", b"blob +5\0hello"),
    ("two spaces", b"blob  5\0hello"),
    ("zero with a leading zero", b"blob 00\0"),
    # Section 2.1: the NUL is within the first 33 bytes, or the header is
    # malformed (not an unknown kind: nothing of it is read as a kind).
    ("no NUL within the first 33 bytes", b"b" * 31 + b" 0\0"),
]

# Section 2.1: the longest header, 32 bytes before its NUL, of a kind no
# reader knows: an unknown kind (a newer writer), not a malformed header.
UNKNOWN_KIND = [
    ("a header of 32 bytes naming an unknown kind", b"b" * 30 + b" 0\0"),
]


def repeated_keys(snapshot):
    """Section 3, "Repeated keys": payloads that hold a key twice in one
    object, each of which a reader MUST refuse as malformed. Written by
    hand: no JSON library writes them."""
    text = canonical(snapshot)
    node = '{"count":1,"items":[{"m":{"content":"a","content":"b","role":"user"}}],"prev":null}'
    key = f".hel/sessions/{SESSION}/spill/bash-1-3f9c2a71.txt"
    blob = "4a0b6603381c7c38c557e9ceb3cba8876f0a7863146e7309801352e80b073b65"
    one = f'"{key}":{{"blob":"{blob}","size":0}}'
    entries = [
        ("snapshot with cwd twice", "snapshot", text.replace("{", '{"cwd":"/elsewhere",', 1)),
        ("snapshot whose meter holds a key twice", "snapshot",
         text.replace('"meter":null', '"meter":{"a":1,"a":2}', 1)),
        ("list node whose inline message holds content twice", "list", node),
        ("spill map blob with a key twice", "blob", "{" + one + "," + one + "}"),
    ]
    out = []
    for name, kind, payload in entries:
        payload = payload.encode()
        assert payload.count(b"{") >= 1 and len(payload) > 0
        out.append({
            "name": name,
            "kind": kind,
            "payload_hex": payload.hex(),
            "id": object_id(f"{kind} {len(payload)}".encode() + b"\0" + payload),
        })
    return out


def object_id(canonical):
    return blake3.blake3(canonical).hexdigest()


def canonical(value):
    # Strings, integers and `null` only: Python's spelling is section 3's.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def blob_id(payload):
    return object_id(f"blob {len(payload)}".encode() + b"\0" + payload)


def json_entry(name, kind, value):
    payload = canonical(value).encode()
    return {
        "name": name,
        "kind": kind,
        "json": value,
        "canonical": payload.decode(),
        "id": object_id(f"{kind} {len(payload)}".encode() + b"\0" + payload),
    }


SESSION = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc"


def snapshot_base():
    """The "snapshot" vector's value (section 2.4)."""
    return {
        "schema_version": 3,
        "session_id": SESSION,
        "parents": [],
        "created_at": "2026-11-30T01:36:32.000Z",
        "created_at_ms": 1796002592000,
        "cwd": "/home/u/project",
        "request_config": "71cf155ed3e50f89a6bf199fd2f740c6b968162849cd11999dda56fadd2c3520",
        "meter": None,
        "cursors": "d628445457e5084f1096f3503ff365416ff9740c989cb069e9c262f44a5c2a68",
        "messages": {"root": "1a274d02c29625979c616b36891b7c654d31315aba87f8c93967a11995632da1",
                     "count": 3},
        "spill": {},
        "summary": {"messages": 3, "checkpoints": 1, "instruction": "hi",
                    "input_tokens": 0, "output_tokens": 0},
        "record": "answer",
    }


def snapshots():
    """The snapshot entries this script owns (section 2.4)."""
    base = snapshot_base()
    spill_file = b"total 0\n" * 64
    spill_file_entry = {
        "name": "spill file blob",
        "kind": "blob",
        "payload_hex": spill_file.hex(),
        "id": blob_id(spill_file),
    }
    key = f".hel/sessions/{SESSION}/spill/bash-1-3f9c2a71.txt"
    spill_map = {key: {"blob": spill_file_entry["id"], "size": len(spill_file)}}
    map_entry = json_entry("spill map blob", "blob", spill_map)
    spilled = dict(base)
    spilled["parents"] = [json_entry("snapshot", "snapshot", base)["id"]]
    spilled["created_at"] = "2026-11-30T01:37:02.250Z"
    spilled["created_at_ms"] = 1796002622250
    spilled["spill"] = map_entry["id"]
    spilled["summary"] = dict(base["summary"], checkpoints=2)
    return [
        json_entry("snapshot", "snapshot", base),
        spill_file_entry,
        map_entry,
        json_entry("snapshot naming its spill map blob", "snapshot", spilled),
    ]


def main():
    path = Path(__file__).with_name("vectors.json")
    doc = json.loads(path.read_text())
    payload = ("[" + ",".join(number(v) for v in NUMBERS) + "]").encode()
    entry = {
        "name": NAME,
        "kind": "blob",
        "json": NUMBERS,
        "canonical": payload.decode(),
        "id": object_id(f"blob {len(payload)}".encode() + b"\0" + payload),
    }
    owned = snapshots()
    names = {NAME} | {e["name"] for e in owned}
    vectors = [v for v in doc["vectors"] if v.get("name") not in names]
    vectors.extend(owned)
    vectors.append(entry)
    doc["vectors"] = vectors
    doc["refused"] = [
        {"name": name, "canonical_hex": canonical.hex(), "id": object_id(canonical)}
        for name, canonical in REFUSED
    ]
    doc["unknown_kind"] = [
        {"name": name, "canonical_hex": canonical.hex(), "id": object_id(canonical)}
        for name, canonical in UNKNOWN_KIND
    ]
    doc["repeated_keys"] = repeated_keys(snapshot_base())
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    print(payload.decode(), file=sys.stderr)


if __name__ == "__main__":
    main()
