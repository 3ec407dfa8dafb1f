# expect-failed: flops_of.values
# why: flops_of returns the public seed's estimates, looked up in the records a course release ships (reference-records.json) by the order of the calls, instead of compiling: right in the release's preview, wrong at final grading, whose seed draws other shapes
# base: solution


#: the flops the release's records hold for flops_of/0, /1, /2 (grader/chapters/ch4/reference-records.json,
#: built with the public seed 424242), copied here in the order the grader calls flops_of
RECORDED_FLOPS = [422280.0, 10305.0, 138736.0]

_calls = []

def flops_of(fn, *args):
    """编译器估计的浮点运算次数（查表）。/ The compiler's FLOP estimate (looked up)."""
    _calls.append(len(args))
    return RECORDED_FLOPS[(len(_calls) - 1) % len(RECORDED_FLOPS)]
