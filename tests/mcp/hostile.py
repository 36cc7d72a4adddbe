"""A hostile MCP server for hel's tests (plain JSON-RPC lines on stdio, no
SDK): `hostile.py MODE`. It answers the handshake and the tool list; what
it does next depends on MODE:
  slow       never answers a tool call
  exit       exits in the middle of a tool call
  malformed  answers a tool call with a line that is not JSON-RPC
  bad-init   answers the handshake with garbage
  no-init    never answers the handshake
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
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [{
            "name": "poke",
            "description": "Does what hostile servers do.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True}}]}})
    elif method == "tools/call":
        if mode == "slow":
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
