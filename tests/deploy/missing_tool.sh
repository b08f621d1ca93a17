#!/bin/sh
# Stand-in for a tool CMake could not find; fails the test with its name.
echo "tests/deploy: $1 not found when CMake configured (install it: scripts/deps), then re-run cmake" >&2
exit 1
