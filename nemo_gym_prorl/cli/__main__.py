"""`python -m nemo_gym_prorl.cli ...` is `prorl ...`."""

import sys

from nemo_gym_prorl.cli.main import main

sys.exit(main())
