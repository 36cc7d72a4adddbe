#!/usr/bin/env python3
"""Print a journal (and its sidecar) byte by byte, each field explained, as
the worked example of objects-spec section 5.7 shows it.

    annotate_journal.py JOURNAL [SIDECAR]

Written from objects-spec alone. Needs the `blake3` package (pip install
blake3) to show the checks and ids hold, and the `zstd` command-line tool to
decompress stored bytes (with hel's dictionary, dictionary-1.zdict beside
this file, only for frames that name it: a frame naming no dictionary is
decompressed without one).
"""

import json
import struct
import subprocess
import sys
from pathlib import Path

import blake3

DICTIONARY = Path(__file__).with_name("dictionary-1.zdict")
DICTIONARY_ID = 0x68656C01
ZSTD_MAGIC = bytes([0x28, 0xB5, 0x2F, 0xFD])
RECORD_TYPES = {1: "object", 2: "commit"}
SHOWN = 360  # payload bytes shown of one object; the rest is counted


def hexline(offset, data, what):
    """One annotated line: the offset, the bytes in hex, what they are."""
    return f"{offset:08x}  {data.hex(' '):<48}  {what}"


def hexlines(offset, data, what):
    """`data` 16 bytes a line; `what` on the first."""
    out = []
    for k in range(0, len(data), 16):
        out.append(hexline(offset + k, data[k:k + 16], what if k == 0 else ""))
    return out


def frame_header(frame):
    """The fields of a zstd frame header: (header length, dictionary id,
    declared content size or None)."""
    fhd = frame[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    at = 5 + (0 if single else 1)
    dict_len = [0, 1, 2, 4][dict_flag]
    dict_id = int.from_bytes(frame[at:at + dict_len], "little")
    at += dict_len
    fcs_len = [1 if single else 0, 2, 4, 8][fcs_flag]
    size = int.from_bytes(frame[at:at + fcs_len], "little") if fcs_len else None
    if fcs_len == 2:
        size += 256
    return at + fcs_len, dict_id, size


def decompress(frame):
    _, dict_id, _ = frame_header(frame)
    cmd = ["zstd", "-q", "-d", "-c"]
    if dict_id == DICTIONARY_ID:
        cmd += ["-D", str(DICTIONARY)]
    elif dict_id != 0:
        raise SystemExit(f"a frame naming dictionary {dict_id:#x}: not hel's")
    return subprocess.run(cmd, input=frame, capture_output=True, check=True).stdout


def annotate_frame(offset, frame, lines):
    hlen, dict_id, size = frame_header(frame)
    fhd = frame[4]
    single = (fhd >> 5) & 1
    lines.append(hexline(offset, frame[:4], "  zstd frame magic"))
    lines.append(hexline(offset + 4, frame[4:5],
                         f"  frame header descriptor {fhd:#04x}: content size field "
                         f"{[1 if single else 0, 2, 4, 8][fhd >> 6]} bytes, "
                         f"dictionary id field {[0, 1, 2, 4][fhd & 3]} bytes"
                         + (", no window byte" if single else "")))
    at = 5 + (0 if single else 1)
    if not single:
        lines.append(hexline(offset + 5, frame[5:6], "  window descriptor"))
    dict_len = [0, 1, 2, 4][fhd & 3]
    if dict_len:
        lines.append(hexline(offset + at, frame[at:at + dict_len],
                             f"  dictionary id (LE) {dict_id:#x}: hel's dictionary"))
        at += dict_len
    if at < hlen:
        lines.append(hexline(offset + at, frame[at:hlen],
                             f"  content size (LE{', +256' if hlen - at == 2 else ''}) = {size}: "
                             "the canonical bytes' length"))
    rest = frame[hlen:]
    lines.append(f"{offset + hlen:08x}  ... {len(rest)} bytes of compressed blocks")


def show(payload):
    text = payload[:SHOWN].decode("utf-8", "backslashreplace")
    more = f" ... ({len(payload) - SHOWN} more bytes)" if len(payload) > SHOWN else ""
    return text + more


def main():
    journal = Path(sys.argv[1]).read_bytes()
    lines = []
    magic, version, kind = journal[:8], *struct.unpack("<II", journal[8:16])
    lines.append(hexline(0, magic, "file magic \"HELPACK\\0\""))
    lines.append(hexline(8, journal[8:12], f"version (u32 LE) = {version}"))
    lines.append(hexline(12, journal[12:16], f"kind (u32 LE) = {kind}: "
                         + {1: "journal", 2: "sealed pack"}.get(kind, "?")))
    at = 16
    while at + 56 <= len(journal):
        h = journal[at:at + 56]
        rtype = h[4]
        rid = h[8:40]
        n = struct.unpack("<Q", h[40:48])[0]
        stored = journal[at + 56:at + 56 + n]
        check_ok = blake3.blake3(h[:48] + stored).digest()[:8] == h[48:56]
        lines.append("")
        lines.append(f"-- record at offset {at} ({56 + n} bytes: header and stored bytes), "
                     f"type {rtype} ({RECORD_TYPES.get(rtype, 'newer hel')})")
        lines.append(hexline(at, h[:4], "record magic \"HELR\""))
        lines.append(hexline(at + 4, h[4:8], f"type {rtype}, then three zero bytes"))
        lines += hexlines(at + 8, rid, "id: " + ("the object's id" if rtype == 1 else
                                                "the snapshot this commit publishes"))
        lines.append(hexline(at + 40, h[40:48], f"stored length (u64 LE) = {n}"))
        lines.append(hexline(at + 48, h[48:56], "check: BLAKE3(header[0..48] + stored)[0..8] "
                             + ("(holds)" if check_ok else "(DOES NOT HOLD)")))
        if stored[:4] == ZSTD_MAGIC:
            annotate_frame(at + 56, stored, lines)
            content = decompress(stored)
        else:
            lines += hexlines(at + 56, stored[:32], "stored bytes (not a frame)")
            content = stored
        if rtype == 1:
            nul = content.index(b"\0")
            header = content[:nul].decode()
            payload = content[nul + 1:]
            ok = blake3.blake3(content).digest() == rid
            lines.append(f"          decompressed: {header!r} NUL, then {len(payload)} payload "
                         f"bytes; BLAKE3 of the canonical bytes {'is' if ok else 'IS NOT'} the id")
            if header.startswith("snapshot") or header.startswith("list") or (
                    header.startswith("blob") and payload[:1] in (b"{", b"[")):
                lines.append("          payload: " + show(payload))
            else:
                lines.append(f"          payload: {len(payload)} bytes")
        else:
            commit = json.loads(content)
            lines.append(f"          commit record JSON ({len(content)} bytes): "
                         + content.decode())
            lines.append(f"          seq {commit['seq']}, parent "
                         f"{(commit['parent'] or 'null')[:12]}, why {commit['why']!r}")
        at += 56 + n
    if at < len(journal):
        lines.append(f"-- {len(journal) - at} bytes after the last record: a torn tail")
    lines.append(f"-- end of the journal: {len(journal)} bytes")

    if len(sys.argv) > 2 and Path(sys.argv[2]).exists():
        jidx = Path(sys.argv[2]).read_bytes()
        lines.append("")
        lines.append(f"-- sidecar ({len(jidx)} bytes)")
        lines.append(hexline(0, jidx[:8], "sidecar magic \"HELJIDX\\0\""))
        lines.append(hexline(8, jidx[8:16], "version (u32 LE) = "
                             f"{struct.unpack('<I', jidx[8:12])[0]}, four zero bytes"))
        for k, e in enumerate(range(16, len(jidx) - 47, 48)):
            entry = jidx[e:e + 48]
            off = struct.unpack("<Q", entry[32:40])[0]
            ln = int.from_bytes(entry[40:47], "little")
            lines += hexlines(e, entry[:32], f"entry {k}: id of the record")
            lines.append(hexline(e + 32, entry[32:40], f"  offset (u64 LE) = {off}"))
            lines.append(hexline(e + 40, entry[40:47], f"  record length (7 bytes LE) = {ln}"))
            lines.append(hexline(e + 47, entry[47:48], f"  type {entry[47]} "
                                 f"({RECORD_TYPES.get(entry[47], '?')})"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
