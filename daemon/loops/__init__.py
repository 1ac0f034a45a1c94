"""One loop per module, each a small async function started in the daemon's root nursery
by ``gochatd.service``: intake (streams or polling), finish, schedule (+sweep), reap,
heartbeat, notify."""
