"""The git repository a loop works in: progress and commits, and a worktree and a branch per
parallel task with the merges into the loop's branch."""
