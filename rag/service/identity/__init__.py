"""Who calls and what they may do: the principal (principal.py), the access policy every part asks
(access.py), bearer tokens (tokens.py) and the editor's sessions (sessions.py)."""
