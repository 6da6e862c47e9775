#!/usr/bin/env bash
# A Stop hook doing what Anthropic's ralph-loop plugin hook does, for comparison in
# bench_hook_vs_bash.py: read the state file's front matter, grep the WHOLE transcript for assistant
# lines, take the last with tail, pull its text with jq, look for the promise, bump the
# iteration with sed, print the block decision with jq.
set -euo pipefail
HOOK_INPUT=$(cat)
STATE=".claude/ralph-loop.local.md"
[[ -f "$STATE" ]] || exit 0
FRONTMATTER=$(sed -n '/^---$/,/^---$/{ /^---$/d; p; }' "$STATE")
ITERATION=$(echo "$FRONTMATTER" | grep '^iteration:' | sed 's/iteration: *//')
PROMISE=$(echo "$FRONTMATTER" | grep '^completion_promise:' | sed 's/completion_promise: *//' | sed 's/^"\(.*\)"$/\1/')
TRANSCRIPT=$(echo "$HOOK_INPUT" | jq -r '.transcript_path')
LAST_LINE=$(grep '"role":"assistant"' "$TRANSCRIPT" | tail -1)
LAST_OUTPUT=$(echo "$LAST_LINE" | jq -r '.message.content | map(select(.type == "text")) | map(.text) | join("\n")' 2>&1 || true)
PROMISE_TEXT=$(echo "$LAST_OUTPUT" | perl -0777 -pe 's/.*?<promise>(.*?)<\/promise>.*/$1/s; s/^\s+|\s+$//g; s/\s+/ /g' 2>/dev/null || echo "")
if [[ -n "$PROMISE" && "$PROMISE_TEXT" == "$PROMISE" ]]; then rm "$STATE"; exit 0; fi
NEXT=$((ITERATION + 1))
PROMPT=$(awk '/^---$/{i++; next} i>=2' "$STATE")
sed "s/^iteration: .*/iteration: $NEXT/" "$STATE" > "$STATE.tmp.$$"
mv "$STATE.tmp.$$" "$STATE"
jq -n --arg prompt "$PROMPT" --arg msg "Ralph iteration $NEXT" '{"decision": "block", "reason": $prompt, "systemMessage": $msg}'
