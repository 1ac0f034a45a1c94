-- What each daemon can run (docs/job-types.md, "A type no daemon can run"): its fleet row
-- carries its handler set as JSON, {"types": [...], "prefixes": [...], "queues": [...]},
-- written by its fleet loop. NULL: a daemon of an older release (it claims every type).
-- The admin API and /metrics compare the waiting jobs' types with the live daemons' sets.
ALTER TABLE gochatd_daemons ADD COLUMN job_types text;
