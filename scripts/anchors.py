#!/usr/bin/env python3
"""python -m xcsuite anchors, from any directory: see xcsuite/cli/anchors.py."""
import _xcsuite

_xcsuite.run("anchors")
