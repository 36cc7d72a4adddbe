#!/usr/bin/env python3
"""Write workspace-vectors.json: tree objects (a directory with a file, an
executable, a symlink, a subdirectory, a not-tracked file and a nested
repository), the schema-2 snapshot fields that name them, and a stat cache
file, and two chains of directories at the depth limit, built from
objects-spec section 10 alone (an implementation
independent of crates/hel-store and crates/hel-workspace, whose tests check
these bytes).

Needs the `blake3` package (pip install blake3).
"""

import json
import struct
from pathlib import Path

import blake3

KINDS = {"file": 1, "symlink": 2, "dir": 3, "not-tracked": 4, "repository": 5}
ZERO = bytes(32)


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def object_id(kind, payload):
    return blake3.blake3(f"{kind} {len(payload)}".encode() + b"\0" + payload).digest()


def tree_payload(entries):
    out = b""
    for name, kind, mode, size, oid in sorted(entries, key=lambda e: e[0]):
        out += bytes([KINDS[kind]]) + struct.pack("<HQ", mode, size) + oid
        out += struct.pack("<H", len(name)) + name
    return out


def chain(levels):
    """The root of a chain of `levels` directories, each the only entry
    (`d`, mode 0755) of the tree above it, the deepest an empty tree: its
    deepest directory is at level `levels` (section 10.1)."""
    tree = b""
    for _ in range(levels):
        tree = tree_payload([(b"d", "dir", 0o755, 0, object_id("tree", tree))])
    return object_id("tree", tree)


def depth():
    """Section 10.1, levels of directories: 255 is the most a root tree
    may hold; a directory at level 256, even an empty one, is over it."""
    return {
        "about": "chain(n): the deepest tree empty, each tree above it holding one entry "
                 "b'd' of kind 3, mode 0o755, size 0 naming the tree below; root = the top",
        "accepted": {"levels": 255, "root": chain(255).hex()},
        "refused": {"levels": 256, "root": chain(256).hex()},
    }


def main():
    blobs = {
        "main.rs": b"fn main() {}\n",
        "run.sh": b"#!/bin/sh\necho hi\n",
        "link": b"src/main.rs",  # a symlink's blob is its target
    }
    ids = {k: object_id("blob", v) for k, v in blobs.items()}
    src = tree_payload([(b"main.rs", "file", 0o644, len(blobs["main.rs"]), ids["main.rs"])])
    src_id = object_id("tree", src)
    root = tree_payload(
        [
            (b"src", "dir", 0o755, 0, src_id),
            (b"run.sh", "file", 0o755, len(blobs["run.sh"]), ids["run.sh"]),
            (b"link", "symlink", 0, len(blobs["link"]), ids["link"]),
            (b"big.bin", "not-tracked", 0, 5_000_000, ZERO),
            (b"vendor", "repository", 0, 0, ZERO),
            ("caf\u00e9".encode() + b"\xff", "file", 0o600, 0, object_id("blob", b"")),
        ]
    )
    root_id = object_id("tree", root)
    workspace = {
        "not_tracked": 1,
        "restored": None,
        "start": root_id.hex(),
        "tree": root_id.hex(),
    }
    # A stat cache (section 10.4): every path of the root tree, the two
    # files hashed with their lstat, the empty file without one.
    walk_start = 1_796_000_000_000_000_000
    stats = {
        b"run.sh": (0o100755, walk_start - 5 * 10**9, walk_start - 4 * 10**9, 12, 2049),
        b"src/main.rs": (0o100644, walk_start - 9 * 10**9, walk_start - 9 * 10**9, 13, 2049),
    }
    flat = [
        (b"big.bin", "not-tracked", 0, 5_000_000, ZERO),
        ("caf\u00e9".encode() + b"\xff", "file", 0o600, 0, object_id("blob", b"")),
        (b"link", "symlink", 0, len(blobs["link"]), ids["link"]),
        (b"run.sh", "file", 0o755, len(blobs["run.sh"]), ids["run.sh"]),
        (b"src", "dir", 0o755, 0, src_id),
        (b"src/main.rs", "file", 0o644, len(blobs["main.rs"]), ids["main.rs"]),
        (b"vendor", "repository", 0, 0, ZERO),
    ]
    assert flat == sorted(flat, key=lambda e: e[0])
    cache = b"HELWSC2\n" + struct.pack("<q", walk_start) + root_id + struct.pack("<I", len(flat))
    prev = b""
    for path, kind, mode, size, oid in flat:
        shared = 0
        while shared < min(len(prev), len(path)) and prev[shared] == path[shared]:
            shared += 1
        suffix = path[shared:]
        cache += struct.pack("<HHBHQ", shared, len(suffix), KINDS[kind], mode, size) + oid
        if kind == "file":
            st_mode, mtime, ctime, ino, dev = stats.get(path, (0, 0, 0, 0, 0))
            cache += struct.pack("<IqqQQ", st_mode, mtime, ctime, ino, dev)
        cache += suffix
        prev = path
    cache += blake3.blake3(cache).digest()
    cache_entries = [
        (p, st[0], next(e[3] for e in flat if e[0] == p), st[1], st[2], st[3], st[4], next(e[4] for e in flat if e[0] == p))
        for p, st in sorted(stats.items())
    ]
    doc = {
        "blobs": {k: {"bytes_hex": v.hex(), "id": ids[k].hex()} for k, v in blobs.items()},
        "trees": [
            {"path": "src", "payload_hex": src.hex(), "id": src_id.hex()},
            {"path": "", "payload_hex": root.hex(), "id": root_id.hex()},
        ],
        "snapshot_workspace": {"canonical": canonical(workspace).decode(), "record": "answer"},
        "cache": {
            "hex": cache.hex(),
            "walk_start_ns": walk_start,
            "root": root_id.hex(),
            "paths": len(flat),
            "entries": [
                {"path": p.decode(), "mode": m, "size": s, "mtime_ns": mt, "ctime_ns": ct, "ino": i, "dev": d, "id": o.hex()}
                for p, m, s, mt, ct, i, d, o in cache_entries
            ],
        },
    }
    doc["depth"] = depth()
    out = Path(__file__).with_name("workspace-vectors.json")
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
