"""Sources kept in sync: the service's part (manage.py), the sync engine (engine.py) and the
schedule `rag serve` runs (schedule.py). The connectors are in rag/sources/."""
