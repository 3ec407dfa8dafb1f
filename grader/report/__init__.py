"""The report: what a grading found (:mod:`grader.results`), and the ways to show it.

The renderers are plain functions from one :class:`~grader.results.Report` to text;
they know nothing of how the results were obtained: each takes the report, the catalog
that puts its messages into words, and the language. ``terminal`` prints the table,
``markdown`` writes ``report.md``, ``page`` the self-contained ``report.html``,
``inline`` a notebook's output; ``render`` writes them (and ``report.json``) and chooses
the files' names.
"""
