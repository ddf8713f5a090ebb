#!/usr/bin/env python3
"""python -m xcsuite application, from any directory: see xcsuite/cli/application.py."""
import _xcsuite

_xcsuite.run("application")
