-- Waiting jobs are reached through one index only: background_jobs_claimable_idx
-- (docs/chaos.md, idle_in_transaction).
--
-- A claimed job's old index entries stay until vacuum may remove them; while a transaction
-- held open elsewhere keeps every one, an index that serves waiting statuses across queues
-- holds one entry per version of every job that ever waited. The claim's probes read the
-- claim index inside its queue and its due window, a few blocks, but after an ANALYZE that
-- saw few waiting rows the planner took background_jobs_status_idx or
-- background_jobs_waiting_idx for them instead (ANALYZE counts a partial index's live rows
-- only, so the bloated claim index looks the dearer one) and walked every dead entry:
-- ~8,000 blocks a claim. So no other index answers a waiting status:
--
-- * the listing by status keeps its index for the finished statuses only (a listing of
--   queued or retrying jobs reads the claim index, or the primary key backwards; of running
--   jobs, at most the fleet's concurrency, background_jobs_lease_idx). The same trap was
--   there for running jobs: the reaper's generic plans read status_idx for 'running', one
--   dead entry per job that ever ran;
-- * the Scheduled tab's index holds only jobs due later than they were written (delayed
--   jobs, retries, requeued and dependent jobs): a job not yet due is one of them, and the
--   claim, which asks for due jobs, cannot prove it is reading one of them. An immediate job
--   (scheduled_at = created_at, the common enqueue) no longer writes an entry here.
DROP INDEX IF EXISTS background_jobs_status_idx;
CREATE INDEX IF NOT EXISTS background_jobs_status_idx
    ON background_jobs (status, id)
    WHERE status NOT IN ('queued', 'retrying', 'running');

DROP INDEX IF EXISTS background_jobs_waiting_idx;
CREATE INDEX IF NOT EXISTS background_jobs_deferred_idx
    ON background_jobs (scheduled_at, id)
    WHERE status IN ('queued', 'retrying') AND scheduled_at > created_at;
