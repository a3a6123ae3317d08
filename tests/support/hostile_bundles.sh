# hostile_bundles.sh — builders of hostile bundles and checkpoints, sourced
# by tests/cli/pack.sh and tests/cli/probe.sh (not a test itself).

# hm_badprov CHAIN IN OUT: the checkpoint IN with its hm.provenance text
# replaced by CHAIN (padded with spaces, so the header keeps its size)
hm_badprov() {
    python3 - "$@" <<'PY'
import json, sys
chain, src, dst = sys.argv[1:4]
b = open(src, "rb").read()
n = int.from_bytes(b[:8], "little")
h = json.loads(b[8:8 + n])
old = h["__metadata__"]["hm.provenance"]
h["__metadata__"]["hm.provenance"] = chain
new = json.dumps(h, separators=(",", ":")).encode()
assert len(new) <= n and len(chain) <= len(old), "chain too long"
open(dst, "wb").write(b[:8] + new + b" " * (n - len(new)) + b[8 + n:])
PY
}

# hm_fanout DIR PREFIX: 10 symlinks in DIR to the folder PREFIX1, 10 in
# PREFIX1 to PREFIX2, ... down to PREFIX8 (10^8 paths, no cycle)
hm_fanout() {
    local l k d
    for l in 1 2 3 4 5 6 7 8; do mkdir -p "$2$l"; done
    for l in 0 1 2 3 4 5 6 7; do
        d="$2$l"; [ $l -eq 0 ] && d="$1"
        for k in 0 1 2 3 4 5 6 7 8 9; do ln -s "$2$((l + 1))" "$d/l$k"; done
    done
}

# hm_zip_bomb ZIP OUT MEMBER: a copy of the zip bundle ZIP whose MEMBER
# (added, or replacing the bundle's own) holds 1 GiB of zeros (~1 MB deflated)
hm_zip_bomb() {
    python3 - "$@" <<'PY'
import sys, zipfile
src, out, member = zipfile.ZipFile(sys.argv[1]), sys.argv[2], sys.argv[3]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    for i in src.infolist():
        if i.filename != member:
            z.writestr(i.filename, src.read(i.filename))
    with z.open(member, "w", force_zip64=True) as f:
        for _ in range(1024):
            f.write(bytes(1 << 20))
PY
}
