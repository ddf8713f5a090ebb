#!/usr/bin/env python3
"""python -m xcsuite aggregate, from any directory: see xcsuite/cli/aggregate.py."""
import _xcsuite

_xcsuite.run("aggregate")
