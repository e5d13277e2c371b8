# ci/lib.sh — shared definitions for the ci/ scripts (sourced, not run).
# Every build product lives outside the repository, under $CHFS_STACK_CACHE.
CHFS_STACK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHFS_STACK_CACHE="${CHFS_STACK_CACHE:-$HOME/.cache/chfs-stack}"
CHFS_STACK_PREFIX="${CHFS_STACK_PREFIX:-$CHFS_STACK_CACHE/prefix}"
CHFS_STACK_BUILD="${CHFS_STACK_BUILD:-$CHFS_STACK_CACHE/build}"
export CHFS_STACK_ROOT CHFS_STACK_CACHE CHFS_STACK_PREFIX CHFS_STACK_BUILD
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }
