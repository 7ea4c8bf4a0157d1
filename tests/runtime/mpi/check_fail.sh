#!/bin/bash
# Usage: check_fail.sh MPIRUN RUNTIME_MPI_FAIL runtime|mpi|hang|groups|nogroup|unwaited|overwritten
# Runs the deliberately failing program on 3 ranks; it must exit non-zero within the timeout (no hang) and print
# the failing rank's message in the runtime's format.
mpirun=$1 prog=$2 mode=$3
out=$(CLEAVE_COMM_TIMEOUT=2 timeout 45 "$mpirun" --allow-run-as-root --oversubscribe -np 3 "$prog" "$mode" 2>&1)
rc=$?
echo "$out"
if [ $rc -eq 124 ]; then echo "FAIL: the job hung (timeout)"; exit 1; fi
if [ $rc -eq 0 ]; then echo "FAIL: the job exited 0"; exit 1; fi
if [ "$mode" = runtime ]; then
  expect='cleave rank 1: deliberate failure for the abort test'
elif [ "$mode" = hang ]; then
  expect='cleave rank [02]: all_reduce_sum on group \[0,1,2\] timed out after 2 s'
elif [ "$mode" = groups ]; then
  expect='cleave rank [012]: create_groups: the ranks passed different group lists'
elif [ "$mode" = unwaited ]; then
  expect='cleave rank 1: an all-reduce on group \[0,1,2\] was started and never waited for \(rt::wait\)'
elif [ "$mode" = overwritten ]; then
  expect='cleave rank 1: an all-reduce on group \[0,1,2\] was overwritten before its wait \(rt::wait\)'
elif [ "$mode" = nogroup ]; then
  expect='cleave rank 1: group \[1,2\] was not made by cleave::rt::create_groups'
else
  expect='cleave rank 1: MPI_Send failed at fail.cpp:[0-9]+: .*rank'
fi
if ! grep -Eq "$expect" <<<"$out"; then echo "FAIL: no line matching: $expect"; exit 1; fi
echo "OK: exit status $rc with the expected message"
