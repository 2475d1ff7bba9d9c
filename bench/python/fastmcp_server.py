"""The fastmcp-tasks 4.1.4 peer for the benchmarks: the same `noop_task(sleep_ms)` tool.

Usage: python fastmcp_server.py PORT. Binds 127.0.0.1 only. In-memory Docket backend
(the default, memory://); fastmcp-tasks keeps a task for Docket's execution_ttl (15 min),
which is longer than any benchmark run, so every task stays retained during a run.
"""

import asyncio
import sys

from fastmcp import FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("fastmcp-tasks-bench")
mcp.add_extension(TasksExtension())


@mcp.tool(task=True)
async def noop_task(sleep_ms: int = 0) -> str:
    """Does nothing, optionally after sleeping sleep_ms milliseconds."""
    if sleep_ms > 0:
        await asyncio.sleep(sleep_ms / 1000)
    return "done"


if __name__ == "__main__":
    port = int(sys.argv[1])
    mcp.run(transport="http", host="127.0.0.1", port=port, log_level="warning")
