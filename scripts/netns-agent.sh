#!/usr/bin/env bash
# Open MPI's rsh agent for the namespace hosts of scripts/netns.sh: where ssh would log in to
# HOST and run the command line, this runs it inside network namespace HOST (dtnn-h<k>).
#   netns-agent.sh [ssh-style options] HOST COMMAND...
while [[ ${1:-} == -* ]]; do shift; done
host=$1
shift
exec ip netns exec "$host" /bin/sh -c "$*"
