#!/bin/bash
# malformed.sh — hm-inspect on every malformed input of samples/bad/.
#
# For each row of samples/bad/expected.tsv (files and HF folders) and for the
# cases built here (a directory given as a file, a missing file, malformed
# bytes on stdin), hm-inspect must:
#   - exit with status exactly 1 (never ≥ 128: a crash; never 124: a hang),
#   - print nothing on stdout,
#   - print "error:", the path and the expected message fragment on stderr.
# A missing hm-inspect is a failure, not a skip.
# Env (set by CTest): HM_BIN (tools dir), HM_SRC (source tree), HM_TMP.
set -u
: "${HM_BIN:?HM_BIN is not set}" "${HM_SRC:?HM_SRC is not set}"
tool="$HM_BIN/hm-inspect"
bad="$HM_SRC/samples/bad"
if [ ! -x "$tool" ]; then
    echo "FAIL: $tool does not exist or is not executable (build hm-inspect first)" >&2
    exit 1
fi
if [ ! -f "$bad/expected.tsv" ]; then
    echo "FAIL: $bad/expected.tsv is missing (python3 tests/gen/make_bad_samples.py)" >&2
    exit 1
fi
mkdir -p "${HM_TMP:-/tmp}"
tmp=$(mktemp -d "${HM_TMP:-/tmp}/malformed.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

n=0
failures=0
fail() {
    echo "FAIL: $1" >&2
    failures=$((failures + 1))
}

# check LABEL PATH-TO-NAME FRAGMENT -- CMD...   (stdin may be redirected by the caller)
check() {
    local label=$1 want_path=$2 frag=$3
    shift 4
    n=$((n + 1))
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -eq 124 ]; then
        fail "$label: hm-inspect hung (killed after 60 s)"
        return
    fi
    if [ $rc -ge 128 ]; then
        fail "$label: hm-inspect crashed (exit $rc, signal $((rc - 128)))"
        sed 's/^/    /' "$tmp/err" >&2
        return
    fi
    [ $rc -eq 1 ] || fail "$label: exit status $rc, expected 1"
    [ -s "$tmp/out" ] && fail "$label: stdout is not empty: $(head -c 200 "$tmp/out")"
    grep -q "error:" "$tmp/err" || fail "$label: stderr lacks 'error:': $(head -c 300 "$tmp/err")"
    if [ -n "$want_path" ] && ! grep -qF -- "$want_path" "$tmp/err"; then
        fail "$label: stderr does not name '$want_path': $(head -c 300 "$tmp/err")"
    fi
    if [ -n "$frag" ] && ! grep -qF -- "$frag" "$tmp/err"; then
        fail "$label: stderr lacks '$frag': $(head -c 300 "$tmp/err")"
    fi
}

while IFS=$'\t' read -r rel level status frag; do
    case "$rel" in '#'* | '') continue ;; esac
    path="$bad/$rel"
    if [ ! -e "$path" ]; then
        fail "$rel: listed in expected.tsv but missing"
        continue
    fi
    check "$rel" "$path" "$frag" -- "$tool" "$path"
done <"$bad/expected.tsv"

# built here
mkdir "$tmp/dir.safetensors"
check "a directory as a file" "$tmp/dir.safetensors" "" -- "$tool" "$tmp/dir.safetensors"
check "a missing file" "$tmp/absent.safetensors" "" -- "$tool" "$tmp/absent.safetensors"
check "malformed bytes on stdin" "" "header does not start with '{'" -- \
    "$tool" - <"$bad/header_array.safetensors"
check "empty stdin" "" "file is empty" -- "$tool" - </dev/null
# a token file where a checkpoint belongs (a name ending in .safetensors:
# the message comes from the magic, not the name)
echo "some text" > "$tmp/t.txt"
if "$HM_BIN/hm-tokenize" --bytes "$tmp/t.txt" -o "$tmp/tokens.safetensors" -q; then
    check "a token file" "$tmp/tokens.safetensors" "an hm token file" -- "$tool" "$tmp/tokens.safetensors"
else fail "hm-tokenize could not write the token file case"; fi
# a valid file cut at every region, copied under a name with a space and a quote
src="$bad/cut_in_first_tensor.safetensors"
odd="$tmp/it's a model.safetensors"
cp "$src" "$odd"
check "odd file name" "" "" -- "$tool" "$odd"

if [ $n -lt 30 ]; then
    fail "only $n cases ran"
fi
if [ $failures -ne 0 ]; then
    echo "malformed.sh: $failures failure(s) in $n cases" >&2
    exit 1
fi
echo "malformed.sh: $n cases, all refused cleanly"
