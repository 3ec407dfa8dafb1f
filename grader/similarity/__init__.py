"""Which of a class's submissions are unusually alike, seen as MOSS sees source and as JAX sees a trace.

Pure measures, no I/O: :mod:`~grader.similarity.source` (winnowed fingerprints of the source),
:mod:`~grader.similarity.jaxpr_text` (a printed jaxpr read back), :mod:`~grader.similarity.traced`
(its canonical form and features) and :mod:`~grader.similarity.ranking` (the pairs of a class, ranked).
"""
