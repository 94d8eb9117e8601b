"""Hostile submissions for chapter 00_introduction: see `cases`."""
