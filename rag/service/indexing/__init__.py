"""Sources in, searchable chunks out: ingesting directories and record corpora (ingest.py), uploaded
and original files (originals.py), publishing a version into the search index (publish.py) and the
queue and worker that run publishes (publish_queue.py)."""
