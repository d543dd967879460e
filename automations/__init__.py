"""Prefect automations, as files (`*.yaml`): the package data of firechunk.automations."""
