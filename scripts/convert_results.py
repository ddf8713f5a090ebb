#!/usr/bin/env python3
"""python -m xcsuite convert_results, from any directory: see xcsuite/cli/convert_results.py."""
import _xcsuite

_xcsuite.run("convert_results")
