#!/usr/bin/env bash
# tests/fault/faults.sh short|long - the fault matrix's runs (`make faults`, `make faults-long`):
# the checker's self-test, then matrix.py's cells against $SLUICE_BUILD_DIR. Skipped (exit 0,
# saying why) where the lab cannot run: not root, or ip / nft / faketime missing. Bounded: the
# short run in 10 minutes, the long one in 3 hours (each cell in 5 minutes).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${SLUICE_BUILD_DIR:?set SLUICE_BUILD_DIR to the build tree}"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
what=${1:-short}
$py "$here/check.py" --self-test >/tmp/sluice-fault-selftest.$$ 2>&1 || {
    cat /tmp/sluice-fault-selftest.$$
    rm -f /tmp/sluice-fault-selftest.$$
    echo "faults: the checker's self-test failed"
    exit 1
}
tail -1 /tmp/sluice-fault-selftest.$$
rm -f /tmp/sluice-fault-selftest.$$
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v nft >/dev/null ||
    [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then
    echo "faults: SKIPPED: needs root, ip (iproute2), nft (nftables) and libfaketime (faketime)"
    exit 0
fi
case $what in
short) limit=600 ;;
*) limit=10800 ;;
esac
export SLUICE_BUILD_DIR
timeout "$limit" $py "$here/matrix.py" "$what"
rc=$?
[ "$rc" -eq 124 ] && echo "faults: the $what run did not end within $limit s"
exit "$rc"
