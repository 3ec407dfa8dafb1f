"""Instructor batch grading: a whole class in one command, here or on a Dask cluster.

``grade batch SUBMISSIONS/ --chapter ch4 --out RESULTS/ [-j N] [--executor dask]``
(:mod:`grader.cli.batch`). The pieces, in the order data flows:

* :mod:`~grader.batch.roster`: the students of ``SUBMISSIONS/`` and their files as bytes;
* :mod:`~grader.batch.reference`: the reference run once for the class, shipped as data;
* :mod:`~grader.batch.executors`, :mod:`~grader.batch.worker_process` and :mod:`~grader.batch.worker`: a worker
  subprocess per student, N at once here or as Dask tasks, each on cores of its own
  (:mod:`~grader.batch.cpus`);
* :mod:`~grader.batch.run`: the batch itself, its manifest (resume) and its outputs;
* :mod:`~grader.batch.gradebook` (``grades.csv``, Gradescope ``results.json``, JUnit XML)
  and :mod:`~grader.batch.summary` (``summary.md``, ``summary.html``), from the reports.
"""
