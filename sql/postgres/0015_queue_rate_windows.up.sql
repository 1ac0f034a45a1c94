-- Rate limits per queue (worker.queue_rates, docs/rate-limits.md): one row per rate-limited
-- queue, the jobs started in its current window. A window is epoch-aligned on the database
-- clock: window_start = floor(epoch / period_s) * period_s. A rate-limited claim locks the
-- row, claims at most count - used jobs and adds what it claimed, in one transaction.
CREATE TABLE queue_rate_windows (
    queue text PRIMARY KEY,
    period_s bigint NOT NULL,
    window_start bigint NOT NULL,
    used bigint NOT NULL
);
