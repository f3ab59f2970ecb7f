"""Orchestration: what runs a whole scenario or a lab's targets on hosts the emulator made.

The recipes in targets/ (stacks, initiators, fio, faults, the points of a run) take hosts
through the vocabulary's Host protocol and never learn how a host was made.  A session stands
above them: it boots or reaches the hosts (emulator/), resolves the scenario into the work to
do, hands that to the recipes, and keeps the run's folder, its journal, a lab's keepers and the
link doctor.  Nothing in the recipes imports this package (pyproject's import-linter contract
"sessions-on-recipes", checked by folder).
"""
