"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546): byte rates and request-handler time per user,
client id, or both, where they are stored (store.py) and how they are enforced (manager.py)."""
