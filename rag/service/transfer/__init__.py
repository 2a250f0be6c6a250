"""Moving a store to another deployment: the part (archives.py), writing an archive
(exporting.py), loading one (importing.py), and what both share (rows.py)."""
