#!/bin/sh
# Runs the example, installing the openclaw-proxy-app package from this
# repository (proto/python) into .venv on first use.
# Install output goes to stderr: stdout carries only session ids.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if ! "$here/.venv/bin/python" -c 'import openclaw_proxy_app' >/dev/null 2>&1; then
    python3 -m venv "$here/.venv" >&2
    "$here/.venv/bin/pip" install --quiet --disable-pip-version-check "$here/../../python" >&2
fi
exec "$here/.venv/bin/python" "$here/echo_app.py" "$@"
