#!/usr/bin/env bash
# Started by `make run`: checks the machine, prints how to connect each MCP host, then serves
# Streamable HTTP on 127.0.0.1:8080 (it prints its URL and host configs), falling back to the
# stdio server on this terminal if HTTP cannot start (hosts start their own stdio servers from
# the printed configuration).
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
echo
echo "Serving Streamable HTTP on http://$ADDR/mcp (Ctrl-C stops it; SBX_HTTP_ADDR picks another address):"
"$BIN" serve --http "$ADDR"
rc=$?
[ "$rc" = 0 ] && exit 0
cat >&2 <<EOT

The HTTP server could not start on $ADDR (said above; another process may hold the port: set
SBX_HTTP_ADDR=127.0.0.1:PORT). Serving over stdio on this terminal instead: paste JSON-RPC
lines, one per line; Ctrl-D stops it. For example:
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}
EOT
exec "$BIN" serve --stdio
