#!/usr/bin/env python3
"""python -m xcsuite claims, from any directory: see xcsuite/cli/claims.py."""
import _xcsuite

_xcsuite.run("claims")
