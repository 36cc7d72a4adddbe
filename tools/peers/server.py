#!/usr/bin/env python3
"""A scripted model server on 127.0.0.1 for tools/peers/run.

It speaks the three wire formats the agents use: OpenAI chat completions
(hel, OpenCode, Pi: POST .../chat/completions), OpenAI's Responses API
(Codex: POST .../responses) and Anthropic's Messages API (Claude Code:
POST .../messages). Every answer is computed from the request: the
instruction is the newest user message holding a marker `[peers:I<n>]`;
the number of tool calls the conversation holds after it says which step of
that instruction's plan comes next (see PLANS). A step is an abstract
action (read, edit, write, shell) which the agent's adapter turns into a
call of the agent's own tools (their names are in each request).

Sockets get TCP_NODELAY (without it every reply waits for a delayed ACK).
Every request is appended to the log as one JSON line: when it arrived and
when its reply was sent (time.monotonic(), the clock the harness uses too),
its path, what it was (step, side request) and its body.

  server.py --agent NAME --project DIR --log FILE [--port N]
prints `listening on 127.0.0.1:PORT` once it accepts connections.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARK = "[peers:I"
MAX_BODY = 64 << 20

# The scripted work: 3 instructions of 10 tool calls each, then an answer.
# Files are those tools/peers/run writes into the project.
PLANS = {
    1: [
        ("read", "src/alpha.py"),
        ("read", "src/beta.py"),
        ("shell", "ls -la src"),
        ("shell", "grep -n VALUE src/alpha.py"),
        ("edit", "src/alpha.py", "VALUE_1 = 1", "VALUE_1 = 10"),
        ("read", "src/alpha.py"),
        ("write", "notes/one.txt", "first note\n" * 20),
        ("shell", "cat notes/one.txt | wc -l"),
        ("read", "README.md"),
        ("shell", "wc -l src/alpha.py src/beta.py"),
    ],
    2: [
        ("read", "src/beta.py"),
        ("read", "src/gamma.py"),
        ("shell", "ls -la notes"),
        ("shell", "grep -rn VALUE_2 src"),
        ("edit", "src/beta.py", "VALUE_2 = 2", "VALUE_2 = 20"),
        ("read", "src/beta.py"),
        ("write", "notes/two.txt", "second note\n" * 20),
        ("shell", "head -3 notes/two.txt"),
        ("read", "notes/one.txt"),
        ("shell", "wc -c src/beta.py notes/two.txt"),
    ],
    3: [
        ("read", "src/gamma.py"),
        ("read", "src/alpha.py"),
        ("shell", "ls -la"),
        ("shell", "grep -rn VALUE_3 src"),
        ("edit", "src/gamma.py", "VALUE_3 = 3", "VALUE_3 = 30"),
        ("read", "src/gamma.py"),
        ("write", "notes/three.txt", "third note\n" * 20),
        ("shell", "tail -2 notes/three.txt"),
        ("read", "notes/two.txt"),
        ("shell", "cat src/*.py | wc -l"),
    ],
    # The experiments after the work: a command the harness kills the agent
    # during (4), the resume after it (5), two processes at once (6, 7)
    # and the resume after them (8).
    # (Not a leading `sleep N`: Claude Code refuses one.)
    4: [("shell", "python3 -c 'import time; time.sleep(31)' && echo done > notes/killed.txt")],
    5: [],
    6: [("shell", "sleep 2")],
    7: [("shell", "sleep 2")],
    8: [],
}


def final_text(n):
    return "Instruction %d done: read, edited, wrote and checked the files." % n


class Adapter:
    """Turns an action into (tool name, arguments) for one agent."""

    def __init__(self, agent, project):
        self.agent = agent
        self.project = project

    def abs(self, p):
        return os.path.join(self.project, p)

    def call(self, action):
        kind = action[0]
        a = self.agent
        if a == "hel":
            if kind == "read":
                return "read_file", {"path": action[1]}
            if kind == "edit":
                return "search_replace", {"path": action[1], "search": action[2], "replace": action[3]}
            if kind == "write":
                return "write_file", {"path": action[1], "content": action[2]}
            return "bash", {"command": action[1]}
        if a == "opencode":
            if kind == "read":
                return "read", {"filePath": self.abs(action[1])}
            if kind == "edit":
                return "edit", {"filePath": self.abs(action[1]), "oldString": action[2], "newString": action[3]}
            if kind == "write":
                return "write", {"filePath": self.abs(action[1]), "content": action[2]}
            return "bash", {"command": action[1], "description": "Runs " + action[1].split()[0]}
        if a == "pi":
            if kind == "read":
                return "read", {"path": action[1]}
            if kind == "edit":
                return "edit", {"path": action[1], "edits": [{"oldText": action[2], "newText": action[3]}]}
            if kind == "write":
                return "write", {"path": action[1], "content": action[2]}
            return "bash", {"command": action[1]}
        if a == "claude":
            if kind == "read":
                return "Read", {"file_path": self.abs(action[1])}
            if kind == "edit":
                return "Edit", {"file_path": self.abs(action[1]), "old_string": action[2], "new_string": action[3]}
            if kind == "write":
                return "Write", {"file_path": self.abs(action[1]), "content": action[2]}
            return "Bash", {"command": action[1], "description": "Runs " + action[1].split()[0]}
        if a == "codex":
            # Codex reads with its shell tool and writes with apply_patch
            # (a free-form tool: the argument is the patch text).
            if kind == "read":
                return "exec_command", {"cmd": "cat " + action[1]}
            if kind == "shell":
                return "exec_command", {"cmd": action[1]}
            if kind == "edit":
                patch = "*** Begin Patch\n*** Update File: %s\n@@\n-%s\n+%s\n*** End Patch\n" % (
                    action[1], action[2], action[3])
                return "apply_patch", patch
            lines = "".join("+" + ln + "\n" for ln in action[2].splitlines())
            patch = "*** Begin Patch\n*** Add File: %s\n%s*** End Patch\n" % (action[1], lines)
            return "apply_patch", patch
        raise ValueError(a)


def text_of(x):
    return json.dumps(x, ensure_ascii=False)


def find_step(items, is_user, is_call):
    """(instruction, step) from a conversation: the newest user item holding
    the marker, and the tool calls after it."""
    idx = None
    for i in range(len(items) - 1, -1, -1):
        it = items[i]
        if is_user(it) and MARK in text_of(it):
            idx = i
            break
    if idx is None:
        return None, 0
    t = text_of(items[idx])
    j = t.rfind(MARK) + len(MARK)
    digits = ""
    while j < len(t) and t[j].isdigit():
        digits += t[j]
        j += 1
    n = int(digits) if digits else 0
    calls = sum(1 for it in items[idx + 1:] if is_call(it))
    return n, calls


class State:
    def __init__(self, args):
        self.agent = args.agent
        self.adapter = Adapter(args.agent, os.path.realpath(args.project))
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.lock = threading.Lock()
        self.counter = 0

    def next_id(self, prefix):
        with self.lock:
            self.counter += 1
            return "%s%d_%s" % (prefix, self.counter, uuid.uuid4().hex[:8])

    def write_log(self, rec):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(rec) + "\n")


def sse(events, named=False):
    out = []
    for ev in events:
        if named:
            out.append("event: %s\ndata: %s\n\n" % (ev["type"], json.dumps(ev)))
        else:
            out.append("data: %s\n\n" % json.dumps(ev))
    return out


# ---- chat completions -------------------------------------------------------

def chat_reply(state, body):
    msgs = body.get("messages") or []
    tools = body.get("tools") or []
    n, k = find_step(
        msgs,
        lambda m: isinstance(m, dict) and m.get("role") == "user",
        lambda m: isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls"),
    )
    kind = "side"
    msg = {"role": "assistant", "content": "Peers benchmark"}
    if n and tools:
        plan = PLANS.get(n, [])
        if k < len(plan):
            name, args = state.adapter.call(plan[k])
            cid = state.next_id("call_")
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
            kind = "I%d.%d:%s" % (n, k + 1, plan[k][0])
        else:
            msg = {"role": "assistant", "content": final_text(n)}
            kind = "I%d.final" % n
    model = body.get("model", "mock-model")
    usage = {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 20, "total_tokens": len(json.dumps(body)) // 4 + 20}
    rid = "chatcmpl-" + uuid.uuid4().hex[:12]
    finish = "tool_calls" if msg.get("tool_calls") else "stop"
    if not body.get("stream"):
        return kind, "application/json", [json.dumps({
            "id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})]
    base = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    evs = []
    if msg.get("tool_calls"):
        tc = msg["tool_calls"][0]
        evs.append(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"], "arguments": ""}}]}, "finish_reason": None}]))
        evs.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": tc["function"]["arguments"]}}]}, "finish_reason": None}]))
    else:
        evs.append(dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]))
        evs.append(dict(base, choices=[{"index": 0, "delta": {"content": msg["content"]}, "finish_reason": None}]))
    evs.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    if (body.get("stream_options") or {}).get("include_usage"):
        evs.append(dict(base, choices=[], usage=usage))
    return kind, "text/event-stream", sse(evs) + ["data: [DONE]\n\n"]


# ---- Responses API (Codex) --------------------------------------------------

def responses_reply(state, body):
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    n, k = find_step(
        items,
        lambda it: isinstance(it, dict) and it.get("role") == "user",
        lambda it: isinstance(it, dict) and it.get("type") in ("function_call", "custom_tool_call", "local_shell_call"),
    )
    rid = "resp_" + uuid.uuid4().hex[:16]
    model = body.get("model", "mock-model")
    kind = "side"
    out = None
    if n and body.get("tools"):
        plan = PLANS.get(n, [])
        if k < len(plan):
            name, args = state.adapter.call(plan[k])
            cid = state.next_id("call_")
            kind = "I%d.%d:%s" % (n, k + 1, plan[k][0])
            if isinstance(args, str):
                out = {"type": "custom_tool_call", "id": "ctc_" + cid, "call_id": cid, "name": name,
                       "input": args, "status": "completed"}
            else:
                out = {"type": "function_call", "id": "fc_" + cid, "call_id": cid, "name": name,
                       "arguments": json.dumps(args), "status": "completed"}
        else:
            kind = "I%d.final" % n
    if out is None:
        text = final_text(n) if n else "Peers benchmark"
        out = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:12], "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    usage = {"input_tokens": len(json.dumps(body)) // 4, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": len(json.dumps(body)) // 4 + 20}
    resp = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": model, "output": [out], "usage": usage}
    if not body.get("stream"):
        return kind, "application/json", [json.dumps(resp)]
    created = dict(resp, status="in_progress", output=[], usage=None)
    evs = [{"type": "response.created", "sequence_number": 0, "response": created},
           {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": out},
           {"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": out},
           {"type": "response.completed", "sequence_number": 3, "response": resp}]
    return kind, "text/event-stream", sse(evs, named=True)


# ---- Anthropic Messages API (Claude Code) -----------------------------------

def messages_reply(state, body):
    msgs = body.get("messages") or []

    def is_user_text(m):
        if not isinstance(m, dict) or m.get("role") != "user":
            return False
        c = m.get("content")
        if isinstance(c, list):
            return any(isinstance(b, dict) and b.get("type") == "text" and MARK in b.get("text", "") for b in c)
        return isinstance(c, str)

    def is_call(m):
        c = m.get("content") if isinstance(m, dict) else None
        return m.get("role") == "assistant" and isinstance(c, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in c)

    n, k = find_step(msgs, is_user_text, is_call)
    model = body.get("model", "claude-mock")
    kind = "side"
    block = {"type": "text", "text": "Peers benchmark"}
    stop = "end_turn"
    if n and body.get("tools"):
        plan = PLANS.get(n, [])
        if k < len(plan):
            name, args = state.adapter.call(plan[k])
            block = {"type": "tool_use", "id": state.next_id("toolu_"), "name": name, "input": args}
            stop = "tool_use"
            kind = "I%d.%d:%s" % (n, k + 1, plan[k][0])
        else:
            block = {"type": "text", "text": final_text(n)}
            kind = "I%d.final" % n
    mid = "msg_" + uuid.uuid4().hex[:16]
    usage = {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": 20,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if not body.get("stream"):
        return kind, "application/json", [json.dumps({
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [block],
            "stop_reason": stop, "stop_sequence": None, "usage": usage})]
    start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}
    evs = [{"type": "message_start", "message": start}]
    if block["type"] == "tool_use":
        evs.append({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
        evs.append({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
    else:
        evs.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        evs.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": block["text"]}})
    evs.append({"type": "content_block_stop", "index": 0})
    evs.append({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20}})
    evs.append({"type": "message_stop"})
    return kind, "text/event-stream", sse(evs, named=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "peers-mock"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *a):
        pass

    def send_body(self, status, ctype, parts):
        data = "".join(parts).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        t_in = time.monotonic()
        st = self.server.state
        if self.path.rstrip("/").endswith("/models"):
            self.send_body(200, "application/json", [json.dumps(
                {"object": "list", "data": [{"id": "mock-model", "object": "model", "owned_by": "peers"}]})])
        else:
            self.send_body(200, "application/json", ["{}"])
        st.write_log({"t_in": t_in, "t_out": time.monotonic(), "method": "GET", "path": self.path, "kind": "get"})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        t_in = time.monotonic()
        st = self.server.state
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length < 0 or length > MAX_BODY:
            self.send_body(413, "text/plain", ["too large"])
            return
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                body = {}
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        try:
            if path.endswith("/chat/completions"):
                kind, ctype, parts = chat_reply(st, body)
            elif path.endswith("/responses"):
                kind, ctype, parts = responses_reply(st, body)
            elif path.endswith("/messages/count_tokens"):
                kind, ctype, parts = "count", "application/json", [json.dumps({"input_tokens": len(raw) // 4})]
            elif path.endswith("/messages"):
                kind, ctype, parts = messages_reply(st, body)
            else:
                kind, ctype, parts = "other", "application/json", ["{}"]
            self.send_body(200, ctype, parts)
        except Exception as e:  # a bad request must not stop the server
            kind = "error: %s" % e
            self.send_body(500, "text/plain", [str(e)])
        st.write_log({"t_in": t_in, "t_out": time.monotonic(), "method": "POST", "path": path,
                      "kind": kind, "body": body})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", required=True, choices=["hel", "codex", "opencode", "pi", "claude"])
    ap.add_argument("--project", required=True)
    ap.add_argument("--log")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.state = State(args)
    print("listening on 127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
