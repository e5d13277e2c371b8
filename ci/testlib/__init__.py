"""Shared pytest helpers of chfs-stack (see chfs_pool.py and netns.py)."""
