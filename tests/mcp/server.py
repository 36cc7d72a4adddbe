"""A real MCP server for hel's tests, made with the official Python SDK
(`mcp` from PyPI, its MCPServer, formerly FastMCP): `server.py stdio` or
`server.py http PORT` (streamable HTTP on 127.0.0.1:PORT/mcp)."""

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("hel-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def big(megabytes: int) -> str:
    """A result of the given size, in megabytes of text."""
    line = "0123456789abcdef" * 4 + "\n"
    n = megabytes * (1 << 20) // len(line)
    return "BEGIN\n" + line * n + "END"


@server.tool()
def env(name: str) -> str:
    """Whether an environment variable is set."""
    return "set" if name in os.environ else "unset"


@server.tool()
def fds() -> str:
    """What each descriptor this process has open points at."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(fd + "=" + os.readlink("/proc/self/fd/" + fd))
        except OSError:
            pass
    return "\n".join(out)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def write(path: str, text: str) -> str:
    """Write the text to the file at the path."""
    with open(path, "w") as f:
        f.write(text)
    return "wrote " + path


if __name__ == "__main__":
    print("hel-test server starting", file=sys.stderr, flush=True)
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
