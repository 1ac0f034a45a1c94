DROP TABLE IF EXISTS gochatd_queue_pauses;
