"""`python -m workers.rl ...`: see workers/rl/cli.py."""

import sys

from workers.rl.cli import main

sys.exit(main())
