"""``python -m proxy`` is the ``chatmend`` command."""

import sys

from proxy.cli import main

sys.exit(main())
