-- A failed dependency cancels everything that waits on it, transitively, in one statement
-- (docs/workflows.md). 0019 cancelled the direct dependents only, and each cancellation
-- fired this trigger again for its own dependents: one nested trigger per link, so a chain
-- of a few hundred jobs ran out of stack ("stack depth limit exceeded") and the head's
-- finish, discard or delete could never commit. Now the first call finds the whole closure
-- (dependents through open edges that do not run past a failure, each still waiting) and
-- cancels it at once; the triggers those cancellations fire resolve their own edges and
-- release run_if_failed dependents, and find nothing left to cancel: two levels deep,
-- whatever the chain's length. A job reached twice is cancelled once, with the reason of
-- the first dependency found.
CREATE OR REPLACE FUNCTION gochatd_resolve_edges(dep_id bigint, dep_status text, why text)
RETURNS void LANGUAGE sql AS $$
    WITH RECURSIVE edges AS (
        UPDATE gochatd_job_dependencies
        SET resolved_status = dep_status
        WHERE depends_on_id = dep_id AND resolved_status IS NULL
        RETURNING job_id, (dep_status <> 'completed' AND NOT run_if_failed) AS fails
    ), doomed(id, why, depth) AS (
        SELECT e.job_id, why, 0 FROM edges AS e WHERE e.fails
        UNION
        SELECT d.job_id, 'dependency ' || doomed.id || ' ended cancelled', doomed.depth + 1
        FROM doomed
        JOIN background_jobs AS p ON p.id = doomed.id AND p.status = 'queued'
                                 AND p.waits_on > 0
        JOIN gochatd_job_dependencies AS d ON d.depends_on_id = doomed.id
        WHERE d.resolved_status IS NULL AND NOT d.run_if_failed
    ), changes AS (
        SELECT DISTINCT ON (c.id) c.id, c.fails, c.why
        FROM (SELECT e.job_id AS id, e.fails, why, 0 AS depth FROM edges AS e
              UNION ALL
              SELECT doomed.id, true, doomed.why, doomed.depth FROM doomed) AS c
        ORDER BY c.id, c.fails DESC, c.depth
    )
    UPDATE background_jobs AS j
    SET waits_on = j.waits_on - 1,
        status = CASE WHEN c.fails THEN 'cancelled' ELSE j.status END,
        error_class = CASE WHEN c.fails THEN 'dependency_failed' ELSE j.error_class END,
        last_error = CASE WHEN c.fails THEN c.why ELSE j.last_error END,
        scheduled_at = CASE WHEN NOT c.fails AND j.waits_on = 1 THEN now()
                            ELSE j.scheduled_at END,
        updated_at = now()
    FROM changes AS c
    WHERE j.id = c.id AND j.status = 'queued' AND j.waits_on > 0;
$$;
