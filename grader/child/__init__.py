"""Code that runs inside the sandbox, next to the student's code.

* :mod:`grader.child.host`: the host process, which imports JAX once and forks one
  job per exercise (started by :class:`grader.runner.host_handles.HostProcess`);
* :mod:`grader.child.job`: one job, which imports a student module and runs the
  exercise's probe;
* :mod:`grader.child.probe`: what a probe uses to call the student's code and record
  what happened (:class:`~grader.child.probe.ProbeContext`);
* :mod:`grader.child.guard`: the job's watch over its own instruments.

Nothing here judges: records cross to the grader as plain data (:mod:`grader.wire`).
The grader's handles on these processes are in :mod:`grader.runner`.
"""
