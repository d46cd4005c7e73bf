from minikafka.cli import run

# Guarded: a log cleaner's process (started with "spawn") imports this module again.
if __name__ == "__main__":
    run()
