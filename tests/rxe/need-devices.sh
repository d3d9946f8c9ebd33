#!/bin/bash
# need-devices.sh DEV[,DEV...] -- CMD [ARG...] - run an rxe-labelled test only
# where its RDMA devices exist (/sys/class/infiniband/DEV), else skip it.
#
# On a machine without them (this one, CI's host tier, a plain `ctest`) it
# prints what is missing and how to get it, and exits 77, which the tests
# register as SKIP_RETURN_CODE: ctest reports them as skipped, not failed.
# Inside the QEMU guest (guest-tier.sh, after guest-up.sh brought up rxe0 and
# rxe1) the devices exist and CMD runs in its place (exec). guest-tier.sh sets
# DMB_RXE_REQUIRED=1, so that there a missing device is a failure (exit 1),
# never a skip that would pass the tier without running it.
set -u
devs=${1:?usage: need-devices.sh DEV[,DEV...] -- CMD [ARG...]}
shift
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "usage: need-devices.sh DEV[,DEV...] -- CMD [ARG...]" >&2; exit 2; }

sys=${DMB_IB_SYSFS:-/sys/class/infiniband}   # another directory only to test this script
missing=()
for d in ${devs//,/ }; do
  [ -e "$sys/$d" ] || missing+=("$d")
done
if [ ${#missing[@]} -eq 0 ]; then
  exec "$@"
fi

have=$(ls "$sys" 2>/dev/null | tr '\n' ' ')
msg="needs the RDMA device(s) ${devs//,/ and } (missing: ${missing[*]}; $sys has: ${have:-nothing})"
if [ "${DMB_RXE_REQUIRED:-0}" = 1 ]; then
  echo "need-devices: FAILED: $msg, and DMB_RXE_REQUIRED=1 (the Soft-RoCE guest should have them)" >&2
  exit 1
fi
echo "SKIPPED: $msg."
echo "  These are the Soft-RoCE tier's tests. Run them with \`make test-rxe\`: it boots a"
echo "  QEMU guest (tests/rxe/vm-run.sh) that brings up rxe0 and rxe1 over a veth pair."
exit 77
