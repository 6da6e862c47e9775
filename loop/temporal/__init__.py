"""A loop of workers beyond one machine, on Temporal: `loopdeck run --engine temporal`,
`loopdeck worker`, `loopdeck temporal dev`.

The loop's rules are `loop.core.workflow`'s, unchanged: here they run inside a Temporal workflow
(`workflow`), whose history is the loop's state, so a coordinator that crashes loses nothing;
the workers' turns, audits and merges run as activities (`activities`) on any machine that runs
`loopdeck worker` against the same server and shared git remote. The only package that imports
the Temporal SDK (an import-linter contract): the single-machine loop never loads it.
"""
