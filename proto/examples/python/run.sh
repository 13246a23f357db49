#!/bin/sh
# Runs the example, installing requirements.txt into .venv on first use.
# Install output goes to stderr: stdout carries only session ids.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if ! "$here/.venv/bin/python" -c 'import grpc, grpc_tools' >/dev/null 2>&1; then
    python3 -m venv "$here/.venv" >&2
    "$here/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
fi
exec "$here/.venv/bin/python" "$here/echo_app.py" "$@"
