DROP TABLE IF EXISTS gochatd_migrations;
