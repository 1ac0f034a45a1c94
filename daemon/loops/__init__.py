"""One loop per module, each a small class: a validated config, the collaborators it needs,
``run_once() -> Result`` and ``run(task_status=...)``. ``gochatd.worker.service`` builds them and
starts them in the root nursery (intake and capped backlog in the job pool's)."""
