# peak_rss.sh — sourced by tests/cli scripts that hold memory to a number.
# peak CMD...: the peak RSS (KB) of CMD, its stdout and stderr discarded;
# CMD's exit status when it fails.
peak() {
    python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if r.returncode: sys.exit(r.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
