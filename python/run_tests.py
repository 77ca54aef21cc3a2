#!/usr/bin/env python3
"""Runs the Python package's tests (CTest's `python_client`; also usable by hand).

Exits 77, which CTest reports as skipped, when this interpreter cannot import pytest:
on Debian 12, `apt-get install python3-pytest`. Extra arguments go to pytest.
"""

import os
import sys

try:
    import pytest
except ImportError:
    print(f"SKIP: pytest is not importable by {sys.executable} "
          "(Debian: apt-get install python3-pytest); the Python package's tests did not run")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-r", "s", os.path.join(HERE, "tests")] + sys.argv[1:]))
