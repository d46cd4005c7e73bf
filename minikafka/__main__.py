import sys

from minikafka.cli import main

# Guarded: a log cleaner's process (started with "spawn") imports this module again.
if __name__ == "__main__":
    sys.exit(main())
