#!/usr/bin/env bash
# Started by `make run`: prints how to connect each MCP host, then serves Streamable HTTP on
# 127.0.0.1 (hosts that prefer stdio start the binary themselves with `serve --stdio`).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/mcp-sandbox
ADDR=${MCP_SANDBOX_HTTP:-127.0.0.1:8080}
cat <<EOT
mcp-sandbox is starting on http://$ADDR/mcp

Connect a host (pick one):
  Claude Code:     claude mcp add --transport http sandbox http://$ADDR/mcp
                   or, over stdio:  claude mcp add sandbox -- $BIN serve --stdio
  Claude Desktop / Cursor (claude_desktop_config.json / ~/.cursor/mcp.json):
    {"mcpServers":{"sandbox":{"command":"$BIN","args":["serve","--stdio"],"env":{}}}}
  VS Code (.vscode/mcp.json):
    {"servers":{"sandbox":{"type":"http","url":"http://$ADDR/mcp"}}}
  Any host over HTTP:
    {"type":"http","url":"http://$ADDR/mcp"}

Check this machine's isolation layers:  $BIN doctor
Stop the server with Ctrl-C.
EOT
exec "$BIN" serve --http "$ADDR"
