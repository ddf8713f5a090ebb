#!/usr/bin/env python3
"""python -m xcsuite run_experiments, from any directory: see xcsuite/cli/run_experiments.py."""
import _xcsuite

_xcsuite.run("run_experiments")
