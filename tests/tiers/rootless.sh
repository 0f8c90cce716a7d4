#!/usr/bin/env bash
# The integration suite again as an ordinary user (uid 65534, no capabilities, no groups):
# user namespaces still give every namespace, seccomp and Landlock; limits fall back to
# rlimits, which the suite checks is reported.
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if [ "$(id -u)" != 0 ]; then
    TAP_PREFIX="rootless: " exec tests/integration/run.sh "$BUILD"
fi
work=$(mktemp -d /tmp/mcp-sandbox-rootless.XXXXXX)
chown 65534:65534 "$work"
TAP_PREFIX="rootless: " HOME=$work TMPDIR=$work \
    setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
    tests/integration/run.sh "$BUILD"
rc=$?
# The sandbox tools end to end, with the server itself unprivileged.
NODE=$PWD/tests/e2e/node_modules/.bin/node22
(cd tests/e2e && HOME=$work TMPDIR=$work SBX_TEST_BIN=$PWD/../../$BUILD/mcp-sandbox \
    setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all \
    "$NODE" --test --test-reporter=tap --test-concurrency=1 --test-timeout=120000 \
    ./tools.test.mjs ./packages.test.mjs) | sed -E 's/^(not )?ok ([0-9]+) - /\1ok \2 - rootless: /'
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
rm -rf "$work"
exit $rc
