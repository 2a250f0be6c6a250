from tests.support.fixtures import *  # noqa: F403  (the service fixtures: svc, admin, settings, handbook, ...)
