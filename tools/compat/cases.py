"""The cases of tools/compat/run: hel against a real llama-cpp-python server.

Run by tools/compat/run, which installs the server and the model and builds
hel. Starts the server on a free port of 127.0.0.1 (the model's own chat
template first, then `chatml-function-calling`), runs hel through the cases
of issue 20 and asserts on what hel sends and records (request bodies and
record.json from --record, the saved checkpoints, exit codes), never on the
small model's wording. Where a figure can only be had from the server (the
real prompt tokens of a request), the request hel recorded is sent again
without a stream and with max_tokens 1, and the server's usage read.

Prints one line per check, the estimated against real tokens of the long
conversation, and `N passed, M failed`; exits 1 when a check failed.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

N_CTX = 8192
# Wall-clock bounds: every wait here has a deadline.
SERVER_START_S = 300
HEL_RUN_S = 3600
HTTP_S = 600

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(bool(ok))
    line = f"{'PASS' if ok else 'FAIL'} {name}"
    if detail and not ok:
        line += f": {detail}"
    print(line, flush=True)
    return ok


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """llama-cpp-python's server on a free loopback port; stopped on exit."""

    def __init__(self, model, chat_format, log_path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(N_CTX),
            "--n_threads", "2",
        ]
        if chat_format:
            argv += ["--chat_format", chat_format]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited ({self.proc.returncode}); see {log_path}")
            try:
                urllib.request.urlopen(f"{self.url}/v1/models", timeout=5)
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(f"the server did not answer in {SERVER_START_S}s; see {log_path}")
                time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()

    def post(self, body):
        """POST a chat-completions body: (status, parsed body or text)."""
        req = urllib.request.Request(
            f"{self.url}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=HTTP_S) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text

    def stream_chunks(self, body):
        """POST `body` streamed; the data of every event, parsed."""
        body = dict(body, stream=True, stream_options={"include_usage": True})
        req = urllib.request.Request(
            f"{self.url}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        chunks = []
        try:
            with urllib.request.urlopen(req, timeout=HTTP_S) as r:
                for raw in r:
                    line = raw.decode().strip()
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks.append(json.loads(line[6:]))
        except http.client.IncompleteRead:
            pass  # the server broke the stream off: what came before counts
        return chunks

    def real_prompt_tokens(self, request):
        """The server's prompt_tokens for `request` as hel sent it."""
        body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
        body["max_tokens"] = 1
        status, resp = self.post(body)
        if status != 200:
            raise SystemExit(f"replaying a request failed: HTTP {status}: {str(resp)[:300]}")
        return resp["usage"]["prompt_tokens"]


class Hel:
    def __init__(self, exe, mock, work):
        self.exe, self.mock, self.work = exe, mock, work
        self.home = tempfile.mkdtemp(prefix="home-", dir=work)

    def project(self, name, files=None):
        d = os.path.join(self.work, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for rel, text in (files or {}).items():
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        return d

    def run(self, project, url, args, record=None):
        argv = [self.exe]
        if url:
            # Read-only: whatever the small model calls, nothing is written
            # or run. The CPU server may take minutes to begin an answer.
            argv += ["--base-url", url, "--model", "smollm2", "--access", "read-only",
                     "--request-timeout", "900"]
        if record:
            shutil.rmtree(record, ignore_errors=True)
            argv += ["--record", record]
        argv += args
        env = {"PATH": os.environ.get("PATH", ""), "HOME": self.home}
        try:
            return subprocess.run(
                argv, cwd=project, env=env, capture_output=True, text=True,
                stdin=subprocess.DEVNULL, timeout=HEL_RUN_S,
            )
        except subprocess.TimeoutExpired:
            raise SystemExit(f"hel took longer than {HEL_RUN_S}s (in {project}); the server's log is in {self.work}")


def session_of(run):
    first = run.stderr.splitlines()[0] if run.stderr else ""
    return first.removeprefix("session: ").strip()


def record_of(d):
    with open(os.path.join(d, "record.json")) as f:
        rec = json.load(f)
    with open(os.path.join(d, "raw", "requests.jsonl")) as f:
        raw = [json.loads(line) for line in f]
    return rec, raw


def shown(hel, project, sid):
    r = hel.run(project, None, ["sessions", "show", sid, "--json"])
    return json.loads(r.stdout)


def tool_calls(message):
    return (message or {}).get("tool_calls") or []


def default_template(server, hel, figures):
    """The model's own chat template: plain and resumed answers, the
    small window, an incomplete instruction, the long conversation."""
    url = server.url + "/v1"
    p = hel.project("plain")
    rec_dir = os.path.join(hel.work, "rec-plain")
    run = hel.run(p, url, ["--context-window", str(N_CTX), "-p", "Say hello in one short sentence."], rec_dir)
    if not check("plain streamed answer: exit 0", run.returncode == 0, run.stderr[-2000:]):
        return
    rec, raw = record_of(rec_dir)
    q, line = rec["requests"][0], raw[0]
    req = line["request"]
    check("the server sends no usage in a stream (its wire format)", "usage" not in line["response"], line["response"])
    check("case 1: a response without usage is estimated, not 0",
          q["estimated"] and q["input_tokens"] > 0 and q["output_tokens"] > 0, q)
    real = server.real_prompt_tokens(req)
    figures["plain"] = {"estimated": q["input_tokens"], "real": real}
    check("case 2: tool_choice auto goes with the tools", req.get("tool_choice") == "auto" and req.get("tools"), req.keys())
    notes = [l for l in run.stderr.splitlines() if "--max-output-tokens" in l]
    check("case 7: one note names both numbers and both flags",
          len(notes) == 1 and "8192 tokens (--max-output-tokens)" in notes[0] and "8192 tokens (--context-window)" in notes[0],
          run.stderr)
    check("case 7: the output limit is lowered to what fits, and it fits",
          req["max_tokens"] < N_CTX and real + req["max_tokens"] <= N_CTX, (req["max_tokens"], real))
    check("case 7: no compaction for a conversation that fits", rec["compaction_requests"] == 0, rec)
    sid = session_of(run)
    log = json.loads(hel.run(p, None, ["sessions", "log", sid, "--json"]).stdout)
    check("case 1: sessions log has the estimate, not 0", log[0]["input_tokens"] > 0 and log[0]["output_tokens"] > 0, log[0])
    meter = shown(hel, p, sid)["meter"]["observed"]
    check("case 1: the saved Meter says its figure is an estimate",
          meter and meter["estimated"] is True and meter["prompt_tokens"] > 0, meter)

    # A resume: the estimated Meter is plausible and kept; not streamed,
    # the server's usage is real.
    run = hel.run(p, url, ["--context-window", str(N_CTX), "resume", sid, "-p", "Say it again."], rec_dir)
    rec, raw = record_of(rec_dir)
    check("resume: exit 0, the saved Meter restored",
          run.returncode == 0 and rec["meter_restored"] and rec["requests"][0]["meter"]["observed"], (run.stderr[-1500:], rec))
    run = hel.run(p, url, ["--context-window", str(N_CTX), "--no-stream", "resume", sid, "-p", "Once more."], rec_dir)
    rec, raw = record_of(rec_dir)
    q = rec["requests"][0]
    check("resume --no-stream: the server's usage is taken",
          run.returncode == 0 and not q["estimated"] and q["input_tokens"] == raw[0]["response"]["usage"]["prompt_tokens"],
          (run.stderr[-1500:], q))

    # Case 6: an instruction that ends incomplete (cut at an output limit of
    # 1) saves a Meter that counts only the messages kept.
    long_text = "Read this and summarize it. " + "The quick brown fox jumps over the lazy dog. " * 180
    run = hel.run(p, url, ["--context-window", str(N_CTX), "--max-output-tokens", "1", "resume", sid, "-p", long_text])
    cp = shown(hel, p, sid)
    observed = cp["meter"]["observed"]
    check("case 6: the incomplete instruction ends with exit 1 and is not kept",
          run.returncode == 1 and long_text not in json.dumps(cp["messages"]), run.stderr[-1500:])
    check("case 6: the saved Meter counts only the messages kept",
          observed is None or observed["messages_sent"] <= len(cp["messages"]), (observed, len(cp["messages"])))
    run = hel.run(p, url, ["--context-window", str(N_CTX), "resume", sid, "-p", "Thanks."], rec_dir)
    rec, raw = record_of(rec_dir)
    q = rec["requests"][0]
    real = server.real_prompt_tokens(raw[0]["request"])
    figures["after_incomplete"] = {"meter_estimate": q["meter"]["estimate"], "sent_chars_4": q["input_tokens"], "real": real}
    # Not more than chars/4 of what was sent (the dropped message is ~2,000).
    check("case 6: after resume the estimate is of what is sent (not of the dropped message)",
          run.returncode == 0 and q["meter"]["estimate"] <= q["input_tokens"], (q, real))

    # The long streamed conversation in an 8k window: compacts instead of
    # overflowing.
    p = hel.project("long")
    rec_dir = os.path.join(hel.work, "rec-long")
    parts = []
    words = ("the project keeps a small store of notes about the build and the tests "
             "while the team moves files between machines and checks every change twice "
             "before anyone ships a release to the people who use it each day").split()
    for i in range(1, 6):
        rng = random.Random(i)
        sentences = [" ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(75)]
        parts += ["-p", f"Part {i} of my notes. Reply with one word. " + " ".join(sentences)]
    # An output limit the small model's rambling answers fit in.
    run = hel.run(p, url, ["--context-window", str(N_CTX), "--max-output-tokens", "1024"] + parts, rec_dir)
    rec, raw = record_of(rec_dir)
    errors = [l["response"]["error"] for l in raw if "error" in l["response"]]
    check("long conversation: every instruction completed, no request refused",
          run.returncode == 0 and rec["termination"] == "completed" and not errors, (run.stderr[-2000:], errors))
    check("long conversation: it compacted", rec["compaction_requests"] >= 1, rec["compaction_requests"])
    rows = []
    for q, line in zip(rec["requests"], raw):
        if q["purpose"] != "turn":
            continue
        real = server.real_prompt_tokens(line["request"])
        rows.append({"estimated": q["input_tokens"], "meter_estimate": q["meter"]["estimate"],
                     "real": real, "max_tokens": line["request"]["max_tokens"]})
    figures["long"] = rows
    check("long conversation: every request fit the window (real prompt + max_tokens)",
          all(r["real"] + r["max_tokens"] <= N_CTX for r in rows), rows)
    check("long conversation: every figure was estimated (no usage)", all(q["estimated"] for q in rec["requests"]), rec["requests"])


def function_calling(server, hel, mock_exe, figures):
    """`chatml-function-calling`: tool calls, as this server streams them."""
    url = server.url + "/v1"
    files = {"app.js": "console.log('app')\n", "util.js": "module.exports = 1\n", "README.md": "# demo\n"}

    # A tool call: the server cannot stream one the model chose itself
    # ("Automatic streaming tool choice is not supported": the stream ends
    # with nothing), so hel asks again without a stream and gets it whole.
    p = hel.project("tools", files)
    rec_dir = os.path.join(hel.work, "rec-tools")
    # The model decides (at temperature 0); a few wordings, in case one
    # does not lead it to a tool.
    for prompt in ["List the files using the glob tool", "Call glob with pattern *.js", "Read app.js"]:
        run = hel.run(p, url, ["--max-turns", "3", "--context-window", str(N_CTX), "-p", prompt], rec_dir)
        rec, raw = record_of(rec_dir)
        if tool_calls((raw[0]["response"].get("choices") or [{}])[0].get("message")):
            break
    first = raw[0]["request"]
    check("a streamed tool call: the server's stream ends with nothing, hel asks again without a stream",
          "stream ended before any of the answer; retrying" in run.stderr, run.stderr[-1500:])
    message = (raw[0]["response"].get("choices") or [{}])[0].get("message")
    if check("cases 3-5: the model made a tool call", tool_calls(message), raw[0]["response"]):
        known = [t["function"]["name"] for t in first["tools"]]
        name = tool_calls(message)[0]["function"]["name"]
        check("case 4: the tool's name is one hel offered, taken once", name in known, name)
        check("case 3/5: the server's message has content null and function_call",
              message.get("content") is None and "function_call" in message, message)
        check("the tool ran and its result went back", len(raw) >= 2, run.stderr[-1500:])
        if len(raw) >= 2:
            sent = raw[1]["request"]["messages"][2]
            check("case 3: the tool-call message goes out with content \"\"", sent.get("content") == "", sent)
            check("case 5: ... and without function_call", "function_call" not in sent, sent)
            check("case 3: the server accepts it", "error" not in raw[1]["response"], raw[1]["response"])
        check("no request was refused", not any("error" in l["response"] for l in raw),
              [l["response"] for l in raw if "error" in l["response"]])
        sid = session_of(run)
        stored = shown(hel, p, sid)["messages"][2]
        check("the session keeps the message as the server sent it", stored == message, (stored, message))

    # Case 2: without tool_choice this template leaves the tools out of the
    # prompt. (Measured with a tool_choice naming a tool, which renders the
    # prompt "auto" does, plus the call's first tokens, and reports the
    # usage of that one prompt.)
    plain = {k: v for k, v in first.items() if k not in ("stream", "stream_options", "tool_choice")}
    named = dict(plain, tool_choice={"type": "function", "function": {"name": "glob"}})
    with_tools = server.real_prompt_tokens(named)
    without = server.real_prompt_tokens(plain)
    figures["tool_choice"] = {"with_tools": with_tools, "without_tool_choice": without}
    check("case 2: without tool_choice the server leaves the tools out of the prompt",
          with_tools > without + 200, (with_tools, without))

    # The server's wire format, as hel-mock's "server": "llama-cpp-python"
    # reproduces it: a stream of a call that tool_choice names repeats the
    # whole name in every chunk and has no usage chunk; one the model
    # chose itself is a stream with nothing in it.
    chunks = server.stream_chunks(named)
    names = [c["choices"][0]["delta"]["tool_calls"][0]["function"]["name"]
             for c in chunks if c.get("choices") and (c["choices"][0].get("delta") or {}).get("tool_calls")]
    check("the server repeats the whole name in every chunk (its wire format)",
          len(names) > 1 and set(names) == {"glob"}, names[:5])
    check("the server sends no usage chunk (its wire format)", not any(c.get("usage") for c in chunks), chunks[-2:])
    check("a tool call the model chose is a stream with nothing in it (its wire format)",
          server.stream_chunks(dict(plain, tool_choice="auto")) == [], "")

    # The validation error the server gives for a null content, as the
    # mock has it.
    body = {"messages": [{"role": "user", "content": "x"},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"id": "c", "type": "function", "function": {"name": "glob", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c", "content": "a.js"}],
            "max_tokens": 1}
    status, resp = server.post(body)
    message = resp.get("error", {}).get("message", "") if isinstance(resp, dict) else ""
    check("the server answers a null content with HTTP 500 \"N validation errors\" (its wire format)",
          status == 500 and " validation error" in message.splitlines()[0], (status, str(resp)[:400]))

    # Case 3, a session made elsewhere: a tool call saved from another
    # server (hel-mock) with content null and function_call resumes here.
    p = hel.project("elsewhere", files)
    script = os.path.join(hel.work, "elsewhere.json")
    with open(script, "w") as f:
        json.dump([
            {"message": {"role": "assistant", "content": None,
                         "function_call": {"name": "glob:", "arguments": "}"},
                         "tool_calls": [{"id": "call_1", "type": "function",
                                         "function": {"name": "glob", "arguments": "{\"pattern\": \"*.js\"}"}}]}},
            {"content": "Two files."},
        ], f)
    mock = subprocess.Popen([mock_exe, "--port", "0", "--script", script], stdout=subprocess.PIPE, text=True)
    try:
        addr = mock.stdout.readline().strip().removeprefix("listening on ")
        run = hel.run(p, f"http://{addr}", ["-p", "list the js files"])
    finally:
        mock.kill()
        mock.wait(timeout=30)
    if not check("case 3: a session with a tool call made against hel-mock", run.returncode == 0, run.stderr[-1500:]):
        return
    sid = session_of(run)
    rec_dir = os.path.join(hel.work, "rec-elsewhere")
    run = hel.run(p, url, ["--max-turns", "3", "--context-window", str(N_CTX), "resume", sid, "-p", "How many files?"], rec_dir)
    rec, raw = record_of(rec_dir)
    sent = raw[0]["request"]["messages"][2]
    check("case 3: a session holding another server's tool call resumes here",
          rec["termination"] in ("completed", "max_turns") and "error" not in raw[0]["response"]
          and sent.get("content") == "" and "function_call" not in sent,
          (run.stderr[-1500:], sent))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hel", required=True)
    ap.add_argument("--hel-mock", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", choices=["default", "chatml-function-calling"], help="one server only")
    a = ap.parse_args()
    a.work = os.path.abspath(a.work)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    hel = Hel(os.path.abspath(a.hel), os.path.abspath(a.hel_mock), a.work)
    figures = {}
    started = time.monotonic()
    for chat_format, cases in [(None, default_template), ("chatml-function-calling", function_calling)]:
        name = chat_format or "default"
        if a.only and a.only != name:
            continue
        print(f"== server: chat template {name}", flush=True)
        server = Server(os.path.abspath(a.model), chat_format, os.path.join(a.work, f"server-{name}.log"))
        try:
            if cases is default_template:
                cases(server, hel, figures)
            else:
                cases(server, hel, os.path.abspath(a.hel_mock), figures)
        finally:
            server.stop()
    with open(os.path.join(a.work, "figures.json"), "w") as f:
        json.dump(figures, f, indent=1)
    long = figures.get("long") or []
    if long:
        est = sum(r["estimated"] for r in long)
        real = sum(r["real"] for r in long)
        print(f"long conversation: {len(long)} turn requests, estimated {est} prompt tokens, real {real} "
              f"({est / real:.2f} of real); per request (estimated/real): "
              + ", ".join(f"{r['estimated']}/{r['real']}" for r in long))
    print(f"cases took {time.monotonic() - started:.0f}s; figures in {os.path.join(a.work, 'figures.json')}")
    passed = sum(RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
