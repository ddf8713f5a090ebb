#!/usr/bin/env python3
"""python -m xcsuite table, from any directory: see xcsuite/cli/table.py."""
import _xcsuite

_xcsuite.run("table")
