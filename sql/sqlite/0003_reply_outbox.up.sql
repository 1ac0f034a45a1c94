-- SQLite twin of sql/postgres/0003. Times are REAL epoch seconds from SQLite's own clock.
CREATE TABLE IF NOT EXISTS reply_outbox (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id           TEXT    NOT NULL DEFAULT 'default',
    job_id              INTEGER,
    channel             TEXT    NOT NULL,
    recipient           TEXT    NOT NULL DEFAULT '',
    body                TEXT    NOT NULL DEFAULT '{}',
    dedupe_key          TEXT    NOT NULL,
    status              TEXT    NOT NULL DEFAULT 'pending',
    attempts            INTEGER NOT NULL DEFAULT 0,
    next_attempt_at     REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    lease_owner         TEXT,
    lease_expires_at    REAL,
    provider_message_id TEXT,
    error_class         TEXT,
    created_at          REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at          REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    sent_at             REAL,
    CONSTRAINT reply_outbox_status_check CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
    CONSTRAINT reply_outbox_channel_check CHECK (length(channel) BETWEEN 1 AND 200),
    CONSTRAINT reply_outbox_dedupe_key_check CHECK (length(dedupe_key) BETWEEN 1 AND 400),
    CONSTRAINT reply_outbox_body_check CHECK (json_valid(body) AND json_type(body) = 'object'),
    CONSTRAINT reply_outbox_tenant_dedupe_key UNIQUE (tenant_id, dedupe_key)
);

CREATE INDEX IF NOT EXISTS reply_outbox_due_idx
    ON reply_outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS reply_outbox_lease_idx
    ON reply_outbox (lease_expires_at) WHERE status = 'sending';
CREATE INDEX IF NOT EXISTS reply_outbox_status_idx ON reply_outbox (status, id);
CREATE INDEX IF NOT EXISTS reply_outbox_job_idx ON reply_outbox (job_id);
