"""I/O plumbing: the hand-off of synchronous units to the threads that own connections."""
