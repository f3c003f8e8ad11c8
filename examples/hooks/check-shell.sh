#!/bin/sh
# A pre_tool_use hook for `shell` calls (see tinyagents::external_hooks): reads the
# hook input (JSON, schema tinyagents.hook/1) on stdin and answers JSON on stdout.
input=$(cat)
case "$input" in
  *'"rm '*|*'"rm"'*)
    # exit status 2: blocked, stderr is the reason the model sees
    echo "deleting files needs a human: ask the user first" >&2
    exit 2
    ;;
esac
echo '{"decision": "approve", "system_message": "shell call checked by hooks/check-shell.sh"}'
