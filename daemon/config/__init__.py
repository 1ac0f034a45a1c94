"""Settings: the declared keys (``fields``), their value parsers (``values``), the merged
``Settings`` (``settings``) and reload."""
