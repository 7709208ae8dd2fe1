#!/usr/bin/env bash
# Open MPI's rsh agent for the namespace hosts of scripts/netns.sh: where ssh would log in to
# HOST and run the command line, this runs it as host HOST (dtnn-h<k>: its network namespace,
# its own hostname; see `netns.sh exec`).
#   netns-agent.sh [ssh-style options] HOST COMMAND...
while [[ ${1:-} == -* ]]; do shift; done
host=$1
shift
exec "$(dirname "$0")/netns.sh" exec "$host" /bin/sh -c "$*"
