"""``python -m proxy`` is the ``chatmend`` command."""

import sys

from proxy.cli import main

if __name__ == "__main__":  # a worker process (proxy/relay/offload.py) imports this module too
    sys.exit(main())
