"""Headless Chromium driven by Selenium (the Debian packages `chromium` and `chromium-driver`).
Without them a test skips, except under CI=1, where it fails: CI installs them
(scripts/install.sh --test)."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser_or_skip() -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"selenium is not installed ({exc})")
    if not (os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)):
        if os.environ.get("CI"):
            pytest.fail("chromium and chromium-driver are missing: scripts/install.sh --test installs them")
        pytest.skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
