DROP TABLE IF EXISTS reply_outbox;
