"""An independent Tasks-extension server for the client tests: fastmcp-tasks 4.1.4.

Usage: python fastmcp_peer.py http PORT | python fastmcp_peer.py stdio

With PORT 0 the peer binds a free port of 127.0.0.1 itself (no port is picked by someone
else and released before the peer binds it) and prints `listening on PORT` on stderr once
the socket is bound.

Tools:
  greet(name)              never a task (the inline fallback)
  slow_echo(text, seconds) may run as a task; sleeps, then echoes
  confirm_delete(filename) task required; asks for confirmation with the MRTR guard
                           pattern (an elicitation input request during the task)
"""

import asyncio
import sys
from datetime import timedelta

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

POLL = timedelta(milliseconds=100)

mcp = FastMCP("fastmcp-peer")
mcp.add_extension(TasksExtension())


@mcp.tool
def greet(name: str) -> str:
    """Say hello. Never a task."""
    return f"Hello, {name}!"


@mcp.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def slow_echo(text: str, seconds: float = 0.3) -> str:
    """Sleep, then echo."""
    await asyncio.sleep(seconds)
    return f"echo: {text}"


@mcp.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def confirm_delete(filename: str, ctx: Context):
    """Ask for confirmation during the task, then answer."""
    responses = ctx.input_responses or {}
    answer = responses.get("confirm")
    if answer is None:
        return mcp_types.InputRequiredResult(
            input_requests={
                "confirm": mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestFormParams(
                        message=f"Delete {filename}?",
                        requested_schema={
                            "type": "object",
                            "properties": {"confirm": {"type": "boolean"}},
                            "required": ["confirm"],
                        },
                    )
                )
            }
        )
    if isinstance(answer, dict):
        action, content = answer.get("action"), answer.get("content") or {}
    else:
        action, content = getattr(answer, "action", None), getattr(answer, "content", None) or {}
    if action == "accept" and content.get("confirm") is True:
        return f"deleted {filename}"
    return f"kept {filename} ({action})"


def serve_http(port: int) -> None:
    """Streamable HTTP on 127.0.0.1:port; port 0 binds a free one and reports it."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(f"listening on {sock.getsockname()[1]}", file=sys.stderr, flush=True)
    config = uvicorn.Config(mcp.http_app(), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        serve_http(int(sys.argv[2]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "stdio":
        mcp.run(transport="stdio", show_banner=False)
    else:
        sys.exit("usage: fastmcp_peer.py http PORT | stdio")
