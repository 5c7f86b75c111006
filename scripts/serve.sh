#!/usr/bin/env bash
# `make serve`: runs Larder on DATA with storage.rules.example, printing a development token
# and a curl command that works against it.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-data}"
PORT="${2:-8080}"
BIN="${LARDER_BIN:-$(swift build -c release --show-bin-path)/larder}"
# A port already taken is said in one line, before any token is printed.
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "larder: error: port $PORT is in use (another larder serve?); choose another: make serve PORT=$((PORT + 1))" >&2
  exit 1
fi
mkdir -p "$DATA"
TOKEN="$("$BIN" token --uid dev --ttl 24h --data "$DATA")"
# The console link signs "dev" in with a token of its own, short-lived, in the URL fragment:
# browsers never send the fragment, so it stays out of the server's logs.
CONSOLE_TOKEN="$("$BIN" token --uid dev --ttl 1h --data "$DATA")"
cat <<MSG
Larder on http://127.0.0.1:$PORT with data in $DATA/ and rules from storage.rules.example.
The binary is $BIN (put it on PATH: export PATH="$(dirname "$BIN"):\$PATH").
A development token for uid "dev" (valid 24 h):

  export TOKEN=$TOKEN

The web console, signed in as "dev" for an hour (then paste a token to sign in again):

  http://127.0.0.1:$PORT/console/#token=$CONSOLE_TOKEN&bucket=app&prefix=users%2Fdev%2F

Try:
  curl -H "Authorization: Bearer \$TOKEN" -H "Content-Type: text/markdown" --data-binary @README.md \\
       "http://127.0.0.1:$PORT/v0/b/app/o?name=users%2Fdev%2Freadme.md"
  curl -H "Authorization: Bearer \$TOKEN" "http://127.0.0.1:$PORT/v0/b/app/o/users%2Fdev%2Freadme.md?alt=media"

MSG
exec "$BIN" serve --data "$DATA" --port "$PORT" --rules storage.rules.example
