# measure.sh — sourced by the bench scripts: one command under /usr/bin/time -v.
#   measure DIR NAME CMD...  runs CMD (stdout DIR/NAME.out, stderr DIR/NAME.err,
#                            the time report DIR/NAME.time) and sets WALL
#                            (seconds, 1 decimal) and RSS_GB (peak RSS in
#                            GB = 10^9 bytes, 2 decimals); returns CMD's status.
[ -x /usr/bin/time ] || { echo "bench: no /usr/bin/time (apt-get install time)" >&2; exit 1; }
measure() {
    local dir=$1 name=$2
    shift 2
    local rc=0
    /usr/bin/time -v -o "$dir/$name.time" "$@" >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
    WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + t[i]; printf "%.1f", s}' "$dir/$name.time")
    RSS_GB=$(awk -F': ' '/Maximum resident set size/ {printf "%.2f", $2 * 1024 / 1e9}' \
        "$dir/$name.time")
    return $rc
}
