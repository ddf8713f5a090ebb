#!/usr/bin/env python3
"""python -m xcsuite plot, from any directory: see xcsuite/cli/plot.py."""
import _xcsuite

_xcsuite.run("plot")
