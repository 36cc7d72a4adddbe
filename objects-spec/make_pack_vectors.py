#!/usr/bin/env python3
"""Write pack-vectors.json: a small sealed pack and its index, and a small
journal with its sidecar, built from objects-spec section 5 alone (an
implementation independent of crates/hel-store, which checks these bytes in
its tests).

Needs the `blake3` package (pip install blake3). Stored object bytes are
zstd frames made of one raw (uncompressed) block, built by hand here, so no
compressor is involved: any zstd decoder reads them. The second journal,
`checkpoint`, holds a schema-3 snapshot naming its spill map blob and a
commit record compressed with hel's dictionary (dictionary-1.zdict), made by
the `zstd` command-line tool (`zstd -3 -D dictionary-1.zdict --no-check`):
any frame that names the dictionary and declares its content size is valid,
so another compressor's bytes are as good as these.
"""

import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import blake3


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def object_bytes(kind, payload):
    return f"{kind} {len(payload)}".encode() + b"\0" + payload


def object_id(kind, payload):
    return blake3.blake3(object_bytes(kind, payload)).digest()


def raw_zstd_frame(data):
    assert len(data) < 128 * 1024
    frame = bytes([0x28, 0xB5, 0x2F, 0xFD])  # magic
    frame += bytes([0x00])  # frame header descriptor: no checksum, window descriptor follows
    frame += bytes([0x58])  # window 2^(10+11)
    frame += ((len(data) << 3) | 1).to_bytes(3, "little")  # last block, raw
    return frame + data


def pack_file_header(kind):
    return b"HELPACK\0" + struct.pack("<II", 1, kind)


def record(rtype, rid, stored):
    head = b"HELR" + bytes([rtype, 0, 0, 0]) + rid + struct.pack("<Q", len(stored))
    check = blake3.blake3(head + stored).digest()[:8]
    return head + check + stored


def index(entries, pack_bytes):
    entries = sorted(entries)
    out = b"HELIDX\0\0" + struct.pack("<II", 1, len(entries))
    fan = [0] * 256
    for rid, _, _ in entries:
        fan[rid[0]] += 1
    total = 0
    for i in range(256):
        total += fan[i]
        out += struct.pack("<I", total)
    for rid, offset, length in entries:
        out += rid + struct.pack("<QQ", offset, length)
    out += blake3.blake3(pack_bytes).digest()
    return out + blake3.blake3(out).digest()


def dictionary_frame(data):
    """`data` as one zstd frame compressed with hel's dictionary, declaring
    its content size and naming dictionary id 0x68656c01."""
    dictionary = Path(__file__).with_name("dictionary-1.zdict")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in"
        src.write_bytes(data)
        subprocess.run(["zstd", "-q", "-3", "--no-check", "-D", str(dictionary),
                        str(src), "-o", str(src) + ".zst"], check=True)
        frame = (Path(tmp) / "in.zst").read_bytes()
    assert frame[:4] == bytes([0x28, 0xB5, 0x2F, 0xFD])
    return frame


def journal_of(session, objects, commit_id, commit_stored):
    """A journal holding `objects` (kind, payload) and one commit record,
    and its sidecar."""
    journal = pack_file_header(1)
    sidecar = b"HELJIDX\0" + struct.pack("<II", 1, 0)
    for kind, payload in objects:
        rid = object_id(kind, payload)
        rec = record(1, rid, raw_zstd_frame(object_bytes(kind, payload)))
        sidecar += rid + struct.pack("<Q", len(journal)) + len(rec).to_bytes(7, "little") + bytes([1])
        journal += rec
    rec = record(2, commit_id, commit_stored)
    sidecar += commit_id + struct.pack("<Q", len(journal)) + len(rec).to_bytes(7, "little") + bytes([2])
    journal += rec
    return journal, sidecar


def checkpoint_journal(session):
    """A session's first checkpoint as the writer of section 6 makes it: a
    spill file, the spill map blob naming it, the config and cursors blobs,
    one list node of two messages, a schema-3 `answer` snapshot whose
    `spill` is the map blob's id, and a commit record whose stored bytes are
    a zstd frame with hel's dictionary."""
    key = f".hel/sessions/{session}/spill/bash-1-3f9c2a71.txt"
    spill = b"".join(f"line {k}\n".encode() for k in range(1, 201))
    spill_map = canonical({key: {"blob": object_id("blob", spill).hex(), "size": len(spill)}})
    config = canonical({"model": "m", "provider": "openai"})
    cursors = b"[]"
    messages = [
        {"role": "user", "content": "List the log"},
        {"role": "assistant", "content": f"It is long; the whole output is in {key}."},
    ]
    node = canonical({"count": 2, "items": [{"m": m} for m in messages], "prev": None})
    summary = {"messages": 2, "checkpoints": 1, "instruction": "List the log",
               "input_tokens": 120, "output_tokens": 30}
    snapshot = canonical({
        "schema_version": 3,
        "session_id": session,
        "parents": [],
        "created_at": "2026-12-07T10:00:00.000Z",
        "created_at_ms": 1796637600000,
        "cwd": "/project",
        "request_config": object_id("blob", config).hex(),
        "meter": {"observed": {"messages_sent": 1, "prompt_tokens": 120, "estimated": False}},
        "cursors": object_id("blob", cursors).hex(),
        "messages": {"root": object_id("list", node).hex(), "count": 2},
        "spill": object_id("blob", spill_map).hex(),
        "summary": summary,
        "record": "answer",
    })
    objects = [("blob", spill), ("blob", spill_map), ("blob", config), ("blob", cursors),
               ("list", node), ("snapshot", snapshot)]
    head = object_id("snapshot", snapshot)
    commit = canonical({
        "deps": [],
        "parent": None,
        "seq": 1,
        "session": session,
        "summary": summary,
        "time_ms": 1796637600000,
        "why": "answer: List the log",
    })
    stored = dictionary_frame(commit)
    journal, sidecar = journal_of(session, objects, head, stored)
    return {
        "about": "A journal of one checkpoint: a schema-3 snapshot whose spill is the id of "
                 "its spill map blob, and a commit record whose stored bytes are a zstd frame "
                 "naming hel's dictionary (0x68656c01) with its content size declared. An "
                 "implementation must read the map through the blob, and the commit record's "
                 "JSON out of the frame.",
        "spill_key": key,
        "objects": [{"kind": k, "payload_hex": p.hex(), "id": object_id(k, p).hex()}
                    for k, p in objects],
        "spill_map_id": object_id("blob", spill_map).hex(),
        "head": head.hex(),
        "ref": head.hex() + "\n",
        "commit_json": commit.decode(),
        "commit_stored_hex": stored.hex(),
        "journal_hex": journal.hex(),
        "jidx_hex": sidecar.hex(),
    }


def torn_tail():
    """Section 5.4, the torn tail's bound: after the checkpoint journal's
    last record, `proved` copies of `header_hex` (a record header whose
    check fails: type 1, zero id, no stored bytes) are a torn tail (the
    first is the damaged record, the 256 after it the candidates a reader
    checks), and `undecided` copies a fault (a 257th candidate)."""
    head = b"HELR" + bytes([1, 0, 0, 0]) + bytes(32) + struct.pack("<Q", 0)
    check = blake3.blake3(head).digest()[:8]
    wrong = bytes(b ^ 0xFF for b in check)
    return {"header_hex": (head + wrong).hex(), "proved": 257, "undecided": 258}


def main():
    session = "0c9e6f1a-1b2c-4d3e-8f40-123456789abc"
    hello = b"hello"
    message = canonical({"role": "user", "content": "Which port?"})
    node = canonical({"count": 1, "items": [{"m": json.loads(message)}], "prev": None})
    node_id = object_id("list", node)
    config = canonical({"model": "m"})
    cursors = b"[]"
    snapshot = canonical({
        "schema_version": 3,
        "session_id": session,
        "parents": [],
        "created_at": "2026-11-30T00:53:20.000Z",
        "created_at_ms": 1796000000000,
        "cwd": "/project",
        "request_config": object_id("blob", config).hex(),
        "meter": None,
        "cursors": object_id("blob", cursors).hex(),
        "messages": {"root": node_id.hex(), "count": 1},
        "spill": {},
        "summary": {"messages": 1, "checkpoints": 1, "instruction": "Which port?",
                    "input_tokens": 0, "output_tokens": 0},
        "record": "answer",
    })
    objects = [("blob", hello), ("list", node), ("blob", config), ("blob", cursors),
               ("snapshot", snapshot)]

    # A sealed pack of all five objects, and its index.
    pack = pack_file_header(2)
    entries = []
    for kind, payload in objects:
        rid = object_id(kind, payload)
        rec = record(1, rid, raw_zstd_frame(object_bytes(kind, payload)))
        entries.append((rid, len(pack), len(rec)))
        pack += rec
    idx = index(entries, pack)

    # A journal: the session's objects but `hello`, then the commit record
    # publishing the snapshot; and its sidecar.
    journal = pack_file_header(1)
    sidecar = b"HELJIDX\0" + struct.pack("<II", 1, 0)
    for kind, payload in objects[1:]:
        rid = object_id(kind, payload)
        rec = record(1, rid, raw_zstd_frame(object_bytes(kind, payload)))
        sidecar += rid + struct.pack("<Q", len(journal)) + len(rec).to_bytes(7, "little") + bytes([1])
        journal += rec
    head = object_id("snapshot", snapshot)
    commit = canonical({
        "deps": [],
        "parent": None,
        "seq": 1,
        "session": session,
        "summary": {"messages": 1, "checkpoints": 1, "instruction": "Which port?",
                    "input_tokens": 0, "output_tokens": 0},
        "time_ms": 1796000000000,
        "why": "checkpoint: Which port?",
    })
    rec = record(2, head, commit)
    sidecar += head + struct.pack("<Q", len(journal)) + len(rec).to_bytes(7, "little") + bytes([2])
    journal += rec

    doc = {
        "about": "Test vectors for objects-spec section 5, generated by make_pack_vectors.py "
                 "(Python, blake3) from the spec alone. Object records store zstd frames of one raw "
                 "block. 'objects' are the kinds and payloads; the pack holds them in this order; "
                 "the journal holds all but the first, then a commit record.",
        "session": session,
        "objects": [{"kind": k, "payload_hex": p.hex(), "id": object_id(k, p).hex()} for k, p in objects],
        "pack_hex": pack.hex(),
        "idx_hex": idx.hex(),
        "journal_hex": journal.hex(),
        "jidx_hex": sidecar.hex(),
        "head": head.hex(),
        "commit_json": commit.decode(),
        "checkpoint": checkpoint_journal(session),
        "torn_tail": torn_tail(),
    }
    out = Path(__file__).with_name("pack-vectors.json")
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
