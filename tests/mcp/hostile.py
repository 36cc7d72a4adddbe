"""A hostile MCP server for hel's tests (plain JSON-RPC lines on stdio, no
SDK): `hostile.py MODE`. It answers the handshake and the tool list; what
it does next depends on MODE:
  slow       never answers a tool call
  exit       exits in the middle of a tool call
  malformed  answers a tool call with a line that is not JSON-RPC
  bad-init   answers the handshake with garbage
  no-init    never answers the handshake
  huge-list  answers every page of the tool list with one tool whose
             input schema holds 120 MB of `0,`, and a next page
  many-pages answers 12 pages of the tool list, each one tool whose
             schema holds 1.5 million zeros and whose description is 1 MB
  endless-list answers the tool list with a line of `0,` that never ends
  huge-result answers a tool call with a result holding 120 MB of `[],`,
             its id last
Large lines are written in pieces: the server itself stays small (its
peak memory counts in hel's, as a child hel reaps).
It ignores SIGTERM, and in slow mode leaves a child of its own running:
its pid and that child's are written to $HOSTILE_PIDS, when set, so a test
can tell that hel's stop took them all."""

import json
import os
import signal
import subprocess
import sys

mode = sys.argv[1]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pids = [os.getpid()]
if mode == "slow":
    pids.append(subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL).pid)
if os.environ.get("HOSTILE_PIDS"):
    with open(os.environ["HOSTILE_PIDS"], "a") as f:
        f.write(" ".join(map(str, pids)) + "\n")


def pieces(head, piece, times, tail):
    sys.stdout.write(head)
    block = piece * (1 << 20)
    for _ in range(times):
        sys.stdout.write(block)
    sys.stdout.write(tail)
    sys.stdout.flush()


pages = 0


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method, id_ = msg.get("method"), msg.get("id")
    if method == "initialize":
        if mode == "no-init":
            continue
        if mode == "bad-init":
            sys.stdout.write("{\"jsonrpc\": \"2.0\", \"id\": [[[\n")
            sys.stdout.flush()
            continue
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"}}})
    elif method == "tools/list" and mode == "huge-list":
        pieces('{"jsonrpc": "2.0", "id": %s, "result": {"nextCursor": "more", "tools": [{"name": "big", "inputSchema": {"type": "object", "x": [' % json.dumps(id_),
               "0,", 60, '0]}}]}}\n')
    elif method == "tools/list" and mode == "many-pages":
        pages += 1
        more = ', "nextCursor": "p%d"' % pages if pages < 12 else ""
        pieces('{"jsonrpc": "2.0", "id": %s, "result": {"tools": [{"name": "t%d", "description": "%s", "inputSchema": {"type": "object", "x": [' % (json.dumps(id_), pages, "d" * (1 << 20)),
               "0,", 1, '0]}}]%s}}\n' % more)
    elif method == "tools/list" and mode == "endless-list":
        sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"tools": [' % json.dumps(id_))
        block = "0," * (1 << 20)
        while True:
            sys.stdout.write(block)
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [{
            "name": "poke",
            "description": "Does what hostile servers do.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        if mode == "slow":
            continue
        if mode == "huge-result":
            pieces('{"result": {"content": [{"type": "text", "text": "x"}], "junk": [',
                   "[],", 40, '[]]}, "jsonrpc": "2.0", "id": %s}\n' % json.dumps(id_))
            continue
        if mode == "exit":
            os._exit(3)
        if mode == "malformed":
            sys.stdout.write("this is {not json-rpc\n")
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": "not a result"}) + "\n")
            sys.stdout.flush()
            continue
    elif id_ is not None:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no such method"}})
