# expect-failed: bucket_length.values
# why: bucket_length returns numpy.int64, not the Python int the contract asks for; the buckets are right,
#      so masked_mean_sq pads and compiles right and loses nothing
# base: solution


def bucket_length(n):
    """>= n 且 >= 8 的最小 2 的幂。/ The smallest power of two >= n and >= 8."""
    return np.int64(max(8, 1 << (int(n) - 1).bit_length()))
