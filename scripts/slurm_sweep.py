#!/usr/bin/env python3
"""python -m xcsuite slurm_sweep, from any directory: see xcsuite/cli/slurm_sweep.py."""
import _xcsuite

_xcsuite.run("slurm_sweep")
