"""The model and the rules: what a loop is, and every decision about it (the engine for the
loop, the scheduler for parallel workers, the texts the agent reads). Pure: no file, no
process, no clock; the import contracts keep it so."""
