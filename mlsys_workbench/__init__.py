"""Shared pieces of the workbench that belong to neither kit: running notebooks headless with
papermill-style parameters (used by the test harness and by ``make figures``)."""
