"""A validate rank started by launch_ranks (`python -m kvplan.validate JOB RANK ...`)."""

import sys

from kvplan.validate.ranks import _rank_main

sys.exit(_rank_main(sys.argv[1:]))
