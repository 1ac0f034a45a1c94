DROP TABLE IF EXISTS gochatd_periodic_slots;
