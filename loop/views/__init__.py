"""What people read: one snapshot of a workspace (`status`, the monitor), the fleet of
workspaces, the summaries of endings."""
