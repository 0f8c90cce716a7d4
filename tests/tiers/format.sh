#!/usr/bin/env bash
# clang-format is clean over every tracked or new C file.
cd "$(dirname "$0")/../.."
. tests/lib.sh
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null)
if out=$(clang-format --dry-run --Werror $files 2>&1); then
    tap_ok "clang-format clean ($(echo "$files" | wc -w) files)"
else
    echo "$out" | head -40
    tap_fail "clang-format clean (run: make format)"
fi
tap_done
