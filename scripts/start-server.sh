#!/usr/bin/env bash
# Started by `make run`: checks the machine, prints how to connect each MCP host, then serves
# Streamable HTTP on 127.0.0.1 when this build has it, and otherwise the stdio server on this
# terminal (hosts start their own stdio servers from the printed configuration).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/mcp-sandbox
ADDR=${SBX_HTTP_ADDR:-127.0.0.1:8080}
"$BIN" doctor || echo "(the default profile cannot run here: see the hints above)"
cat <<EOT

Connect an MCP host over stdio (the host starts the server itself):
  Claude Code:
    claude mcp add sandbox -- $BIN serve --stdio
  Claude Desktop (claude_desktop_config.json), Cursor (~/.cursor/mcp.json), .mcp.json:
    {"mcpServers":{"sandbox":{"command":"$BIN","args":["serve","--stdio"],"env":{}}}}
  VS Code (.vscode/mcp.json):
    {"servers":{"sandbox":{"type":"stdio","command":"$BIN","args":["serve","--stdio"]}}}

Run a command in a fresh sandbox:  $BIN run -- /usr/bin/python3 -c 'print(1)'
EOT
if "$BIN" serve --http "$ADDR" 2>/dev/null; then
    exit 0
fi
cat >&2 <<EOT

Streamable HTTP (http://$ADDR/mcp) is not part of this build yet, so the server now runs over
stdio on this terminal: paste JSON-RPC lines, one per line; Ctrl-D stops it. For example:
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
EOT
exec "$BIN" serve --stdio
