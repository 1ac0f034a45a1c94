-- The reply outbox: replies a job produced, written in the same transaction as its fenced
-- completion and delivered by the sender loop (daemon/outbox/loop.py) through a provider.
-- id is the stable primary key; (tenant_id, dedupe_key) makes a reply unique per tenant.
CREATE TABLE IF NOT EXISTS reply_outbox (
    id                  bigserial   PRIMARY KEY,
    tenant_id           text        NOT NULL DEFAULT 'default',
    job_id              bigint,
    channel             text        NOT NULL,
    recipient           text        NOT NULL DEFAULT '',
    body                jsonb       NOT NULL DEFAULT '{}',
    dedupe_key          text        NOT NULL,
    status              text        NOT NULL DEFAULT 'pending',
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    lease_owner         text,
    lease_expires_at    timestamptz,
    provider_message_id text,
    error_class         text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    sent_at             timestamptz,
    CONSTRAINT reply_outbox_status_check CHECK (status IN ('pending', 'sending', 'sent', 'dead')),
    CONSTRAINT reply_outbox_channel_check CHECK (length(channel) BETWEEN 1 AND 200),
    CONSTRAINT reply_outbox_dedupe_key_check CHECK (length(dedupe_key) BETWEEN 1 AND 400),
    CONSTRAINT reply_outbox_body_check CHECK (jsonb_typeof(body) = 'object'),
    CONSTRAINT reply_outbox_tenant_dedupe_key UNIQUE (tenant_id, dedupe_key)
);

-- The sender's due-claim and its lease reaper.
CREATE INDEX IF NOT EXISTS reply_outbox_due_idx
    ON reply_outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS reply_outbox_lease_idx
    ON reply_outbox (lease_expires_at) WHERE status = 'sending';
CREATE INDEX IF NOT EXISTS reply_outbox_status_idx ON reply_outbox (status, id);
CREATE INDEX IF NOT EXISTS reply_outbox_job_idx ON reply_outbox (job_id);
