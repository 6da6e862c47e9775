"""The monitor's panels, one a module; each draws itself from a Snapshot and holds no state."""
