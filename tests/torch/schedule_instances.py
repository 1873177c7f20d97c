#!/usr/bin/python3
"""schedule_instances.py - scripts/torch_schedule.py reads remat's schedule as the instance rules say.

    /usr/bin/python3 tests/torch/schedule_instances.py

Hand-worked cases on a three-op chain a -> b -> c whose schedule frees b
after the forward and recomputes it twice in the backward:

    0 FWD a   1 FWD b   2 FWD c   3 FREE b   4 BWD c   5 RECOMPUTE b
    6 BWD b   7 FREE b  8 RECOMPUTE b   9 BWD a   10 FREE b

b has three instances, made at 0-based instructions 1, 5 and 8, alive
[1, 3), [5, 7) and [8, 10). A reader at instruction s reads the instance
live at s, else the next one made after s, else the last one; the forward
(limit = the first BWD, 4) sees only the instance made at 1. Also: the
derivative-formula rule that assigns a backward node to its op. Prints
"ok" lines; exits 1 on the first wrong answer.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import torch_schedule as ts  # noqa: E402

GRAPH = {"ops": [{"id": "a", "op": "relu", "inputs": ["x"]}, {"id": "b", "op": "relu", "inputs": ["a"]},
                 {"id": "c", "op": "relu", "inputs": ["b"]}]}
SCHEDULE = ["FWD a", "FWD b", "FWD c", "FREE b", "BWD c", "RECOMPUTE b", "BWD b", "FREE b", "RECOMPUTE b",
            "BWD a", "FREE b"]


def check(what, got, want):
    if got != want:
        print("FAIL %s: got %r, expected %r" % (what, got, want))
        sys.exit(1)
    print("ok %s: %r" % (what, got))


def main():
    iv, bwd, first = ts.intervals(SCHEDULE, GRAPH)
    check("instances of b", iv["b"], [[1, 3], [5, 7], [8, 10]])
    check("a is never freed", iv["a"], [[0, None]])
    check("BWD steps", bwd, {"c": 4, "b": 6, "a": 9})
    check("first BWD", first, 4)
    check("b read at 2 (live)", ts.instance(iv, "b", 2), 1)
    check("b read at 4 (freed: the next one)", ts.instance(iv, "b", 4), 5)
    check("b read at 6 (live)", ts.instance(iv, "b", 6), 5)
    check("b read at 7 (freed again: the next one)", ts.instance(iv, "b", 7), 8)
    check("b read at 10 (none later: the last one)", ts.instance(iv, "b", 10), 8)
    check("b read in the forward at 3", ts.instance(iv, "b", 3, limit=first), 1)
    check("a tensor the schedule never names", ts.instance(iv, "x", 5), None)
    check("convolution_backward is convolution's", ts._formula_of("convolution_backward", "convolution"), True)
    check("threshold_backward is relu's", ts._formula_of("threshold_backward", "relu"), True)
    check("_softmax_backward_data is _softmax's", ts._formula_of("_softmax_backward_data", "_softmax"), True)
    check("embedding_dense_backward is embedding's", ts._formula_of("embedding_dense_backward", "embedding"), True)
    check("mm is no op's formula", ts._formula_of("mm", "addmm"), False)
    check("native_batch_norm_backward is not convolution's",
          ts._formula_of("native_batch_norm_backward", "convolution"), False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
