"""What the benchmark scripts share: running a command that prints one JSON line."""
import json
import subprocess
import sys


def run_json(cmd):
    """Runs cmd and returns the first line of its standard output that is a JSON object; exits
    with the command and its output when there is none."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    sys.exit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
